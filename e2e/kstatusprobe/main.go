// kstatusprobe computes an object's status the way Flux's `wait`, kpt and cli-utils do: with
// kstatus itself (sigs.k8s.io/cli-utils/pkg/kstatus/status), not a re-implementation. It reads
// one object as JSON on stdin (`kubectl get -o json`) and prints the result as JSON:
//
//	kubectl get jetstreamcluster js -o json | kstatusprobe
//	{"status":"InProgress","message":"..."}
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// Report is what the probe prints on stdout.
type Report struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kstatusprobe:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	raw, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	// Unstructured's own decoder keeps integers int64 (generation, observedGeneration), as
	// kstatus reads them; encoding/json would make them float64.
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return fmt.Errorf("stdin is not one Kubernetes object as JSON: %w", err)
	}
	res, err := status.Compute(obj)
	if err != nil {
		return fmt.Errorf("computing the status: %w", err)
	}
	return json.NewEncoder(out).Encode(Report{Status: res.Status.String(), Message: res.Message})
}
