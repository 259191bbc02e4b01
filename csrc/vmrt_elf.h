/* Loader for IREE's "embedded-elf-x86_64" executables: the self-contained
 * ET_DYN shared objects iree-compile's llvm-cpu backend emits. It maps the
 * image into this process, relocates it and resolves exported symbols; it
 * trusts nothing in the bytes (every header, table and relocation is checked)
 * but of course cannot make the machine code itself safe to call. */
#ifndef VMRT_ELF_H_
#define VMRT_ELF_H_

#include <stddef.h>
#include <stdint.h>

typedef struct vmrt_elf_module vmrt_elf_module_t;

/* Flags of vmrt_elf_load_ex. */
enum {
  /* Validate DT_INIT/DT_INIT_ARRAY but do not call them: for fuzzing and
   * inspection, where no code from the image may run. */
  VMRT_ELF_LOAD_NO_INITIALIZERS = 1,
  /* Check an image the system loader is to load (vmrt_executable.c): also what
   * that loader would act on unchecked (hash tables, dynamic tags, notes,
   * finalizers, relocations only into writable segments, file offsets congruent
   * to addresses). Implies VMRT_ELF_LOAD_NO_INITIALIZERS. */
  VMRT_ELF_LOAD_FOR_SYSTEM = 2
};

/* The header and program-header checks alone (file bytes; nothing is mapped):
 * 0 or the status code vmrt_elf_load_ex would return for them, with its
 * message. For the Python twin's tests (vmrt/hal/elf_check.py). */
int vmrt_elf_check_headers(const uint8_t* data, size_t size, uint32_t flags, char* error,
                           size_t error_capacity);

/* Loads an ELF image from memory. Returns 0 on success; on failure returns a
 * nonzero IREE status code (3 INVALID_ARGUMENT for malformed/unsupported input,
 * 8 RESOURCE_EXHAUSTED when mapping fails, 5 NOT_FOUND for unresolved symbols,
 * 18 INCOMPATIBLE for another architecture/class/byte order, 14 UNAVAILABLE
 * when the host itself is not x86-64 Linux) and writes a one-line message
 * (NUL-terminated, truncated to error_capacity) into error. Runs the image's
 * initializers (DT_INIT, then DT_INIT_ARRAY in order), as IREE's loader does. */
int vmrt_elf_load(const uint8_t* data, size_t size,
                  vmrt_elf_module_t** out_module, char* error,
                  size_t error_capacity);

/* vmrt_elf_load with VMRT_ELF_LOAD_* flags. */
int vmrt_elf_load_ex(const uint8_t* data, size_t size, uint32_t flags,
                     vmrt_elf_module_t** out_module, char* error,
                     size_t error_capacity);

/* Address of a defined, exported function symbol, or NULL. */
void* vmrt_elf_lookup(vmrt_elf_module_t* module, const char* name);

/* vmrt_elf_lookup with the reason for a NULL: 0 (found), 5 NOT_FOUND, or 3
 * INVALID_ARGUMENT when the name is exported but not at an entry point
 * (vmrt_elf_is_entry): a symbol moved off its function. */
int vmrt_elf_find(vmrt_elf_module_t* module, const char* name, void** out_address);

/* How many bytes from `address` on are readable in the image: to the end of the
 * loaded segment holding it (0 when none does; gaps between segments are not
 * mapped readable). */
size_t vmrt_elf_readable(const vmrt_elf_module_t* module, const void* address);

/* Whether `address` may be entered: inside an executable segment, and at the
 * start of a function where the image lists them all (.eh_frame, or a .symtab
 * with local functions), else not strictly inside a function it lists. */
int vmrt_elf_is_entry(const vmrt_elf_module_t* module, const void* address);

/* Unmaps the image but keeps what was learnt of it (segments, symbols,
 * functions); vmrt_elf_attach then says where another loader put the same
 * image (its load bias), which vmrt_elf_unload will leave mapped. */
void vmrt_elf_detach(vmrt_elf_module_t* module);
void vmrt_elf_attach(vmrt_elf_module_t* module, uintptr_t bias);

/* Unmaps everything; NULL is allowed. */
void vmrt_elf_unload(vmrt_elf_module_t* module);

/* Introspection for tests: base address and size of the reserved span. */
uintptr_t vmrt_elf_base(vmrt_elf_module_t* module);
size_t vmrt_elf_size(vmrt_elf_module_t* module);

#endif /* VMRT_ELF_H_ */
