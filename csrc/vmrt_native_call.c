/* See vmrt_native_call.h. */
#include "vmrt_native_call.h"

_Thread_local char vmrt_status_message_buffer[512];

vmrt_status_t vmrt_host_make_status(int32_t code, const char* message) {
  if (!code) return VMRT_OK;
  snprintf(vmrt_status_message_buffer, sizeof(vmrt_status_message_buffer),
           "%s", message ? message : "");
  return code;
}

vmrt_status_t vmrt_call_packed(const vmrt_call_t* call, void* block,
                               size_t rets_offset) {
  if (!call->fn) return VMRT_CALL_RELEASED;
  vmrt_status_message_buffer[0] = 0;
  return call->fn(call->stack, call->module, call->state, block,
                  (char*)block + rets_offset);
}

vmrt_status_t vmrt_alloc_state(vmrt_alloc_state_fn_t fn, void* module,
                               void** out_state) {
  vmrt_status_message_buffer[0] = 0;
  *out_state = NULL;
  return fn(module, out_state);
}

void vmrt_free_state(vmrt_free_state_fn_t fn, void* module, void* state) {
  fn(module, state);
}

const char* vmrt_status_message(void) { return vmrt_status_message_buffer; }
