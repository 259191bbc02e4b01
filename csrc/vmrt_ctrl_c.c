/* The SIGINT counter of vmrt_ctrl_c.h. */
#include "vmrt_ctrl_c.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

int64_t vmrt_ctrl_c_presses = 0;

/* The handler this one chains to: written only while this one is not installed. */
static struct sigaction chained;
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;

static void count_press(int signum, siginfo_t* info, void* context) {
  __atomic_add_fetch(&vmrt_ctrl_c_presses, 1, __ATOMIC_SEQ_CST);
  if (chained.sa_flags & SA_SIGINFO) {
    chained.sa_sigaction(signum, info, context);
  } else if (chained.sa_handler != SIG_DFL && chained.sa_handler != SIG_IGN) {
    chained.sa_handler(signum);
  }
}

static int is_counting(const struct sigaction* action) {
  return (action->sa_flags & SA_SIGINFO) && action->sa_sigaction == count_press;
}

int vmrt_ctrl_c_watch(void) {
  struct sigaction current;
  if (sigaction(SIGINT, NULL, &current) == 0 && is_counting(&current)) return 1;
  pthread_mutex_lock(&watch_lock);
  int watching = 0;
  if (sigaction(SIGINT, NULL, &current) == 0) {
    if (is_counting(&current)) {
      watching = 1;
    } else if ((current.sa_flags & SA_SIGINFO) ||
               (current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN)) {
      chained = current;
      struct sigaction counting = current;  /* (its mask and flags: SA_RESTART or not) */
      counting.sa_flags |= SA_SIGINFO;
      counting.sa_sigaction = count_press;
      watching = sigaction(SIGINT, &counting, NULL) == 0;
    }
  }
  pthread_mutex_unlock(&watch_lock);
  return watching;
}
