/* Ctrl-C for loops that run without the GIL (vmrt/ctrl_c.py).
 *
 * Python runs its SIGINT handler only on the main thread, between bytecodes: a
 * loop in C (a native dispatch, the C tier's code) never gives it the chance. So
 * a C handler goes in front of Python's (chained: Python's still runs, and with it
 * whatever Python handler is set) and counts the presses; a loop notes the count
 * when it starts and stops, at the points where it already checks for failures,
 * once the count has moved. */
#ifndef VMRT_CTRL_C_H_
#define VMRT_CTRL_C_H_

#include <stdint.h>

/* SIGINTs received while the handler was in place (read with __atomic loads). */
extern int64_t vmrt_ctrl_c_presses;

/* Puts the counting handler in front of SIGINT's, when that is a handler (not
 * SIG_DFL or SIG_IGN) and not already this one. Returns 1 when it is in place.
 * Called where long work starts (and by the C tier at each slice's end): a
 * program that set a new handler since (signal.signal puts Python's C handler
 * back) is counted again from there. One system call when nothing changed. */
int vmrt_ctrl_c_watch(void);

/* Whether Ctrl-C was pressed since the count was `seen`. */
static inline int vmrt_ctrl_c_since(int64_t seen) {
  return __atomic_load_n(&vmrt_ctrl_c_presses, __ATOMIC_RELAXED) != seen;
}

static inline int64_t vmrt_ctrl_c_now(void) {
  return __atomic_load_n(&vmrt_ctrl_c_presses, __ATOMIC_RELAXED);
}

/* The count as long work starts, the handler watching from then on. */
static inline int64_t vmrt_ctrl_c_start(void) {
  vmrt_ctrl_c_watch();
  return vmrt_ctrl_c_now();
}

#endif /* VMRT_CTRL_C_H_ */
