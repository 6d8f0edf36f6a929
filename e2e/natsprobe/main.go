// natsprobe is an independent client for msgbench's fault tests: nats.go (not async-nats, not
// msgbench's code) publishing into a stream that a BenchmarkRun is using, on a subject of its
// own, and reading its own messages back with an ordered consumer. It reports what it saw as
// JSON: its acknowledged messages that the stream does not hold when read back afterwards
// (lostAcked), its longest publish stall
// (the longest gap between acknowledgements) and its per-second deliveries. Sharing the run's stream shares its Raft group, leader and elections,
// so a fault on that stream's leader is the same fault for both.
//
//	natsprobe --servers nats://10.244.0.5:4222,... --stream-prefix crash_ --seconds 14
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Report is what the probe prints on stdout.
type Report struct {
	Stream         string  `json:"stream"`
	Subject        string  `json:"subject"`
	Published      int     `json:"published"`
	Acked          int     `json:"acked"`
	Failed         int     `json:"failed"`
	Received       int     `json:"received"`
	Kept           int     `json:"kept"`
	LostAcked      int     `json:"lostAcked"`
	LongestStallMs float64 `json:"longestStallMs"`
	StallStartMs   int64   `json:"stallStartUnixMs"`
	PerSecond      []int   `json:"perSecond"`
	StartUnixMs    int64   `json:"startUnixMs"`
	LongestGapMs   float64 `json:"longestDeliveryGapMs"`
	GapStartUnixMs int64   `json:"deliveryGapStartUnixMs"`
	// The stream was still unknown when the read-back's bound ran out, the servers answering
	// again: gone, nothing of it kept (a power loss before its creation reached the disk).
	StreamGone bool `json:"streamGone"`
}

// The stall is computed differently from msgbench on purpose: the longest gap between
// successive acknowledgements (the first one counted from the first publish). The probe
// publishes without pause from start to end, so nothing idle can hide in a gap.
func longestGap(start time.Time, acks []time.Time) (time.Duration, time.Time) {
	sort.Slice(acks, func(i, j int) bool { return acks[i].Before(acks[j]) })
	prev := start
	var longest time.Duration
	at := start
	for _, a := range acks {
		if d := a.Sub(prev); d > longest {
			longest, at = d, prev
		}
		prev = a
	}
	return longest, at
}

func main() {
	servers := flag.String("servers", "", "comma-separated nats:// URLs")
	prefix := flag.String("stream-prefix", "", "the run's stream: the first stream whose name starts with this")
	seconds := flag.Int("seconds", 14, "how long to publish")
	rate := flag.Int("rate", 200, "messages per second")
	drain := flag.Duration("drain", 3*time.Second, "how long to wait for the last deliveries")
	find := flag.Duration("find", 60*time.Second, "how long to wait for the run's stream")
	flag.Parse()
	if err := run(*servers, *prefix, *seconds, *rate, *drain, *find); err != nil {
		fmt.Fprintln(os.Stderr, "natsprobe:", err)
		os.Exit(1)
	}
}

func run(servers, prefix string, seconds, rate int, drain, find time.Duration) error {
	nc, err := nats.Connect(servers, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256),
		jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		return err
	}
	ctx := context.Background()
	stream, subject, err := findStream(ctx, js, prefix, find)
	if err != nil {
		return err
	}
	rep := Report{Stream: stream, Subject: subject}
	var mu sync.Mutex
	received := map[uint64]bool{}
	var lastDelivery time.Time
	start := time.Now()
	rep.StartUnixMs = start.UnixMilli()
	rep.PerSecond = make([]int, seconds+int(drain.Seconds())+2)
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
	})
	if err != nil {
		return err
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if len(m.Data()) >= 8 {
			received[binary.BigEndian.Uint64(m.Data())] = true
		}
		if !lastDelivery.IsZero() {
			if gap := now.Sub(lastDelivery); float64(gap.Microseconds())/1000 > rep.LongestGapMs {
				rep.LongestGapMs = float64(gap.Microseconds()) / 1000
				rep.GapStartUnixMs = lastDelivery.UnixMilli()
			}
		}
		lastDelivery = now
		if s := int(now.Sub(start) / time.Second); s < len(rep.PerSecond) {
			rep.PerSecond[s]++
		}
	})
	if err != nil {
		return err
	}
	defer cc.Stop()

	acked := map[uint64]bool{}
	var ackTimes []time.Time
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(rate)
	total := seconds * rate
	for i := 0; i < total; i++ {
		// Open loop: each message at its intended time, whatever the server does.
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		seq := uint64(i + 1)
		data := make([]byte, 64)
		binary.BigEndian.PutUint64(data, seq)
		mu.Lock()
		rep.Published++
		mu.Unlock()
		f, err := js.PublishAsync(subject, data)
		if err != nil {
			mu.Lock()
			rep.Failed++
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-f.Ok():
				mu.Lock()
				ackTimes = append(ackTimes, time.Now())
				acked[seq] = true
				mu.Unlock()
			case <-f.Err():
				mu.Lock()
				rep.Failed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	time.Sleep(drain)
	cc.Stop()
	// Loss is judged on a fresh read of the stream, not on the live consumer: that one may
	// still be re-creating itself after the fault, which is not a lost message.
	// Retried within the bound: right after a fault the servers may still answer "JetStream
	// system temporarily unavailable" (503) while their groups catch up.
	var kept map[uint64]bool
	deadline := time.Now().Add(30 * time.Second)
	for {
		kept, err = readBack(ctx, js, stream, subject, drain+10*time.Second)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				kept, rep.StreamGone = map[uint64]bool{}, true
				break
			}
			return fmt.Errorf("reading the stream back: %w", err)
		}
		fmt.Fprintln(os.Stderr, "natsprobe: reading back, will retry:", err)
		time.Sleep(time.Second)
	}
	mu.Lock()
	defer mu.Unlock()
	rep.Acked = len(acked)
	rep.Received = len(received)
	rep.Kept = len(kept)
	for seq := range acked {
		if !kept[seq] {
			rep.LostAcked++
		}
	}
	longest, at := longestGap(start, ackTimes)
	rep.LongestStallMs = float64(longest.Microseconds()) / 1000
	rep.StallStartMs = at.UnixMilli()
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// findStream waits for a stream named prefix… and returns it with a subject of the probe's own
// inside it (its first subject, `X.>`, becomes `X.natsprobe`).
func findStream(ctx context.Context, js jetstream.JetStream, prefix string, within time.Duration) (string, string, error) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		names := js.StreamNames(ctx)
		for name := range names.Name() {
			if !strings.HasPrefix(name, prefix) {
				continue
			}
			s, err := js.Stream(ctx, name)
			if err != nil {
				continue
			}
			subjects := s.CachedInfo().Config.Subjects
			if len(subjects) == 0 || !strings.HasSuffix(subjects[0], ".>") {
				return "", "", fmt.Errorf("stream %s: subjects %v, not X.>", name, subjects)
			}
			return name, strings.TrimSuffix(subjects[0], ">") + "natsprobe", nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", "", fmt.Errorf("no stream named %s… within %s", prefix, within)
}

// readBack reads every message on subject from the stream (a new ordered consumer) and
// returns the sequences found, within the bound.
func readBack(ctx context.Context, js jetstream.JetStream, stream, subject string, within time.Duration) (map[uint64]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return nil, err
	}
	want := int(info.State.Subjects[subject])
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
	})
	if err != nil {
		return nil, err
	}
	kept := map[uint64]bool{}
	read := 0
	for read < want {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, err
		}
		for m := range batch.Messages() {
			read++
			if len(m.Data()) >= 8 {
				kept[binary.BigEndian.Uint64(m.Data())] = true
			}
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read %d of %d messages of %s back within %s", read, want, subject, within)
		}
	}
	return kept, nil
}
