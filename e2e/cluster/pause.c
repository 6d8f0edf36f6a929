/* Pod sandbox process for the local cluster: holds the pod's namespaces, reaps zombies, exits on
 * SIGINT/SIGTERM. Built static and imported as registry.k8s.io/pause:3.10, since no registry is
 * reachable here. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) { (void)sig; _exit(0); }

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, 0, WNOHANG) > 0) {
  }
}

int main(void) {
  signal(SIGINT, on_stop);
  signal(SIGTERM, on_stop);
  signal(SIGCHLD, on_child);
  for (;;) pause();
}
