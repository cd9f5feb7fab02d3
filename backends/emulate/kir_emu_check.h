// kir_emu_check.h -- the checked build of an emulated kernel (`kir check`, metal_kernel(check=True)).
//
// The kernel is compiled with -fsanitize=thread, which makes the compiler call __tsan_readN /
// __tsan_writeN before every load and store that may touch shared memory. No ThreadSanitizer
// runtime is linked: the callbacks are defined here (as -fsanitize=bounds's handlers are in
// kir_emu_runtime.h), and they see each access's address and the instruction that made it:
//
// * device buffers: the worker passes each buffer inside a red zone of RED bytes on both sides;
//   an access that lands in a red zone is out of bounds and fails the launch at once (before the
//   store corrupts anything), naming the buffer, the byte offset and the instruction;
// * outputs MLX leaves uninitialised (no init_value): a shadow byte per output byte remembers
//   whether some thread wrote it; a read of a byte never written is a read-before-write;
// * threadgroup memory: per byte, the last writer and reader and the barrier round (epoch) of
//   each; a read of a byte no thread of the group wrote, or two threads touching one byte in
//   the same round with at least one write (and no atomic), is reported.
//
// Findings carry the instruction's offset in the shared object; the Python side maps it to the
// user's file and line with addr2line (the kernel is built with -g1, and #line directives name
// the user's files). Callbacks are excluded from instrumentation and never allocate.
#ifndef KIR_EMU_CHECK_H
#define KIR_EMU_CHECK_H

#include <dlfcn.h>

#define KIR_EMU_UNCHECKED __attribute__((no_sanitize("thread"), noinline))

namespace kir_emu::check {

constexpr uintptr_t RED = 64 * 1024;  // red zone on each side of a device buffer (worker side too)
enum Role : uint32_t { INPUT = 0, OUTPUT = 1, OUTPUT_FILLED = 2 };

struct Buffer { uintptr_t lo, hi; uint32_t role, index; uint8_t* written; };
struct Shadow { uint32_t writer, wepoch, reader, repoch; };  // thread + 1, barrier round + 1
struct Group { uintptr_t lo, hi; Shadow* shadow; const char* file; uint32_t line; };
struct Finding {
  const char* kind;
  uintptr_t pc;
  int32_t buffer;
  int64_t offset, other;
  uint32_t group[3], tid[3];
  uint64_t count;
};

constexpr int MAX_BUFFERS = 64, MAX_GROUPS = 64, MAX_FINDINGS = 128;
struct State {
  bool on = false;
  int busy = 0;          // inside a callback or the runtime's failure path: do not recurse
  int atomic = 0;        // inside an atomic operation: no race, still bounds and initialisation
  uintptr_t base = 0;    // load address of this shared object
  Buffer buffers[MAX_BUFFERS] = {};
  int nbuffers = 0;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  Group groups[MAX_GROUPS] = {};
  int ngroups = 0;
  uintptr_t group_lo = UINTPTR_MAX, group_hi = 0;
  Finding findings[MAX_FINDINGS] = {};
  int nfindings = 0;
  uint64_t dropped = 0;
};
inline State& state() {
  static State s;
  return s;
}

KIR_EMU_UNCHECKED inline void record(const char* kind, uintptr_t pc, int32_t buffer, int64_t offset,
                                     int64_t other) {
  State& S = state();
  for (int i = 0; i < S.nfindings; i++) {
    Finding& f = S.findings[i];
    if (f.kind == kind && f.pc == pc - S.base && f.buffer == buffer) { f.count++; return; }
  }
  if (S.nfindings == MAX_FINDINGS) { S.dropped++; return; }
  Runtime& R = *rt();
  Fiber& me = self();
  Finding& f = S.findings[S.nfindings++];
  f = Finding{kind, pc - S.base, buffer, offset, other, {R.gid[0], R.gid[1], R.gid[2]},
              {me.tid[0], me.tid[1], me.tid[2]}, 1};
}

KIR_EMU_UNCHECKED inline void device_access(Buffer& b, uintptr_t a, size_t n, bool write, uintptr_t pc) {
  State& S = state();
  if (a < b.lo || a + n > b.hi) {
    Fiber& me = self();
    // `busy` stays set: the failure path may run instrumented code.
    fail("out-of-bounds %s [kir-check bounds pc=0x%lx buffer=%u offset=%ld size=%zu thread=%u,%u,%u]",
         write ? "write" : "read", (unsigned long)(pc - S.base), b.index, (long)(a - b.lo), n,
         me.tid[0], me.tid[1], me.tid[2]);
  }
  if (!b.written) return;
  uint8_t* w = b.written + (a - b.lo);
  if (write) { memset(w, 1, n); return; }
  for (size_t k = 0; k < n; k++)
    if (!w[k]) { record("uninit-output", pc, (int32_t)b.index, (int64_t)(a - b.lo + k), -1); return; }
}

KIR_EMU_UNCHECKED inline void group_access(Group& g, uintptr_t a, size_t n, bool write, uintptr_t pc) {
  State& S = state();
  Runtime& R = *rt();
  uint32_t me = self().lin + 1, epoch = R.tg_gen + 1;
  uintptr_t first = a < g.lo ? g.lo : a, last = a + n > g.hi ? g.hi : a + n;
  int32_t id = -1 - (int32_t)(&g - S.groups);
  bool reported = false;
  for (uintptr_t p = first; p < last; p++) {
    Shadow& s = g.shadow[p - g.lo];
    int64_t offset = (int64_t)(p - g.lo);
    if (!reported && !write && s.writer == 0) {
      record("uninit-threadgroup", pc, id, offset, -1);
      reported = true;
    }
    if (!reported && !S.atomic) {
      bool ww = s.writer && s.writer != me && s.wepoch == epoch;
      bool rw = write && s.reader && s.reader != me && s.repoch == epoch;
      if (ww || rw) {
        record("race-threadgroup", pc, id, offset, (int64_t)(ww ? s.writer : s.reader) - 1);
        reported = true;
      }
    }
    if (write) { s.writer = me; s.wepoch = epoch; }
    else { s.reader = me; s.repoch = epoch; }
  }
}

KIR_EMU_UNCHECKED inline void access(const volatile void* addr, size_t n, bool write, uintptr_t pc) {
  State& S = state();
  if (!S.on || S.busy) return;
  uintptr_t a = (uintptr_t)addr;
  S.busy++;
  bool device = false;  // (the buffers' window may span the threadgroup statics too)
  if (a + n > S.lo && a < S.hi) {
    for (int i = 0; i < S.nbuffers && !device; i++) {
      Buffer& b = S.buffers[i];
      if (a + n > b.lo - RED && a < b.hi + RED) { device_access(b, a, n, write, pc); device = true; }
    }
  }
  if (!device && a + n > S.group_lo && a < S.group_hi) {
    for (int i = 0; i < S.ngroups; i++) {
      Group& g = S.groups[i];
      if (a + n > g.lo && a < g.hi) { group_access(g, a, n, write, pc); break; }
    }
  }
  S.busy--;
}

// A threadgroup variable reached for the first time (its static initialiser runs register_tg).
KIR_EMU_UNCHECKED inline void on_register(void* p, size_t n, const char* file, uint32_t line) {
  State& S = state();
  if (S.ngroups == MAX_GROUPS) return;
  Group& g = S.groups[S.ngroups++];
  g = Group{(uintptr_t)p, (uintptr_t)p + n, (Shadow*)calloc(n, sizeof(Shadow)), file, line};
  if (g.lo < S.group_lo) S.group_lo = g.lo;
  if (g.hi > S.group_hi) S.group_hi = g.hi;
}

// A new threadgroup starts: its memory is poisoned again, so nothing in it is written yet.
KIR_EMU_UNCHECKED inline void on_group_start() {
  State& S = state();
  for (int i = 0; i < S.ngroups; i++) memset(S.groups[i].shadow, 0, (S.groups[i].hi - S.groups[i].lo) * sizeof(Shadow));
}

struct AtomicScope {
  KIR_EMU_UNCHECKED AtomicScope() { state().atomic++; }
  KIR_EMU_UNCHECKED ~AtomicScope() { state().atomic--; }
};

}  // namespace kir_emu::check

#define KIR_CHECK_CALLBACK(name, n, write) \
  extern "C" KIR_EMU_UNCHECKED void name(void* p) { ::kir_emu::check::access(p, n, write, (uintptr_t)__builtin_return_address(0)); }
KIR_CHECK_CALLBACK(__tsan_read1, 1, false)
KIR_CHECK_CALLBACK(__tsan_read2, 2, false)
KIR_CHECK_CALLBACK(__tsan_read4, 4, false)
KIR_CHECK_CALLBACK(__tsan_read8, 8, false)
KIR_CHECK_CALLBACK(__tsan_read16, 16, false)
KIR_CHECK_CALLBACK(__tsan_write1, 1, true)
KIR_CHECK_CALLBACK(__tsan_write2, 2, true)
KIR_CHECK_CALLBACK(__tsan_write4, 4, true)
KIR_CHECK_CALLBACK(__tsan_write8, 8, true)
KIR_CHECK_CALLBACK(__tsan_write16, 16, true)
KIR_CHECK_CALLBACK(__tsan_unaligned_read2, 2, false)
KIR_CHECK_CALLBACK(__tsan_unaligned_read4, 4, false)
KIR_CHECK_CALLBACK(__tsan_unaligned_read8, 8, false)
KIR_CHECK_CALLBACK(__tsan_unaligned_read16, 16, false)
KIR_CHECK_CALLBACK(__tsan_unaligned_write2, 2, true)
KIR_CHECK_CALLBACK(__tsan_unaligned_write4, 4, true)
KIR_CHECK_CALLBACK(__tsan_unaligned_write8, 8, true)
KIR_CHECK_CALLBACK(__tsan_unaligned_write16, 16, true)
KIR_CHECK_CALLBACK(__tsan_volatile_read1, 1, false)
KIR_CHECK_CALLBACK(__tsan_volatile_read2, 2, false)
KIR_CHECK_CALLBACK(__tsan_volatile_read4, 4, false)
KIR_CHECK_CALLBACK(__tsan_volatile_read8, 8, false)
KIR_CHECK_CALLBACK(__tsan_volatile_read16, 16, false)
KIR_CHECK_CALLBACK(__tsan_volatile_write1, 1, true)
KIR_CHECK_CALLBACK(__tsan_volatile_write2, 2, true)
KIR_CHECK_CALLBACK(__tsan_volatile_write4, 4, true)
KIR_CHECK_CALLBACK(__tsan_volatile_write8, 8, true)
KIR_CHECK_CALLBACK(__tsan_volatile_write16, 16, true)
#undef KIR_CHECK_CALLBACK
extern "C" KIR_EMU_UNCHECKED void __tsan_read_range(void* p, unsigned long n) {
  ::kir_emu::check::access(p, n, false, (uintptr_t)__builtin_return_address(0));
}
extern "C" KIR_EMU_UNCHECKED void __tsan_write_range(void* p, unsigned long n) {
  ::kir_emu::check::access(p, n, true, (uintptr_t)__builtin_return_address(0));
}
extern "C" KIR_EMU_UNCHECKED void __tsan_init() {}
extern "C" KIR_EMU_UNCHECKED void __tsan_func_entry(void*) {}
extern "C" KIR_EMU_UNCHECKED void __tsan_func_exit() {}
extern "C" KIR_EMU_UNCHECKED void __tsan_vptr_update(void**, void*) {}
extern "C" KIR_EMU_UNCHECKED void __tsan_vptr_read(void**) {}
// Atomics the compiler emits (static-local guards, std::atomic): done for real, unobserved.
#define KIR_CHECK_ATOMICS(bits, T)                                                                    \
  extern "C" KIR_EMU_UNCHECKED T __tsan_atomic##bits##_load(const volatile T* a, int) {               \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST); }                                                    \
  extern "C" KIR_EMU_UNCHECKED void __tsan_atomic##bits##_store(volatile T* a, T v, int) {            \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST); }                                                       \
  extern "C" KIR_EMU_UNCHECKED T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) {            \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); }                                             \
  extern "C" KIR_EMU_UNCHECKED T __tsan_atomic##bits##_fetch_add(volatile T* a, T v, int) {           \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }                                              \
  extern "C" KIR_EMU_UNCHECKED T __tsan_atomic##bits##_fetch_sub(volatile T* a, T v, int) {           \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); }                                              \
  extern "C" KIR_EMU_UNCHECKED T __tsan_atomic##bits##_fetch_and(volatile T* a, T v, int) {           \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); }                                              \
  extern "C" KIR_EMU_UNCHECKED T __tsan_atomic##bits##_fetch_or(volatile T* a, T v, int) {            \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }                                               \
  extern "C" KIR_EMU_UNCHECKED T __tsan_atomic##bits##_fetch_xor(volatile T* a, T v, int) {           \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); }                                              \
  extern "C" KIR_EMU_UNCHECKED int __tsan_atomic##bits##_compare_exchange_strong(                     \
      volatile T* a, T* c, T v, int, int) {                                                           \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); }         \
  extern "C" KIR_EMU_UNCHECKED int __tsan_atomic##bits##_compare_exchange_weak(                       \
      volatile T* a, T* c, T v, int, int) {                                                           \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); }          \
  extern "C" KIR_EMU_UNCHECKED T __tsan_atomic##bits##_compare_exchange_val(                          \
      volatile T* a, T c, T v, int, int) {                                                            \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return c; }
KIR_CHECK_ATOMICS(8, uint8_t)
KIR_CHECK_ATOMICS(16, uint16_t)
KIR_CHECK_ATOMICS(32, uint32_t)
KIR_CHECK_ATOMICS(64, uint64_t)
#undef KIR_CHECK_ATOMICS
extern "C" KIR_EMU_UNCHECKED void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
extern "C" KIR_EMU_UNCHECKED void __tsan_atomic_signal_fence(int) {}

// ---------------------------------------------------------------- the worker's side
// table: 4 x uint64 per buffer (first byte, end, role, argument index).
extern "C" __attribute__((visibility("default"))) KIR_EMU_UNCHECKED
void kir_emu_check_begin(const uint64_t* table, int n) {
  using namespace kir_emu::check;
  State& S = state();
  kir_emu::group_start_hook() = &on_group_start;
  Dl_info info;
  S.base = dladdr((void*)&kir_emu_check_begin, &info) ? (uintptr_t)info.dli_fbase : 0;
  for (int i = 0; i < S.nbuffers; i++) free(S.buffers[i].written);
  S.nbuffers = 0;
  S.lo = UINTPTR_MAX;
  S.hi = 0;
  for (int i = 0; i < n && i < MAX_BUFFERS; i++) {
    const uint64_t* row = table + 4 * i;
    Buffer& b = S.buffers[S.nbuffers++];
    b = Buffer{(uintptr_t)row[0], (uintptr_t)row[1], (uint32_t)row[2], (uint32_t)row[3], nullptr};
    if (b.role == OUTPUT) b.written = (uint8_t*)calloc(b.hi - b.lo + 1, 1);
    if (b.lo - RED < S.lo) S.lo = b.lo - RED;
    if (b.hi + RED > S.hi) S.hi = b.hi + RED;
  }
  S.nfindings = 0;
  S.dropped = 0;
  S.busy = 0;
  S.atomic = 0;
  S.on = true;
}

// Writes the findings and the threadgroup variables as lines of `key=value` words.
extern "C" __attribute__((visibility("default"))) KIR_EMU_UNCHECKED
int kir_emu_check_end(char* out, uint64_t len) {
  using namespace kir_emu::check;
  State& S = state();
  S.on = false;
  std::string text;
  char line[512];
  for (int i = 0; i < S.nfindings; i++) {
    const Finding& f = S.findings[i];
    const char* file = "";
    uint32_t where = 0;
    if (f.buffer < 0) { file = S.groups[-1 - f.buffer].file; where = S.groups[-1 - f.buffer].line; }
    snprintf(line, sizeof line,
             "finding kind=%s pc=0x%lx buffer=%d offset=%ld other=%ld group=%u,%u,%u thread=%u,%u,%u "
             "count=%lu declared=%s:%u\n",
             f.kind, (unsigned long)f.pc, f.buffer, (long)f.offset, (long)f.other, f.group[0], f.group[1],
             f.group[2], f.tid[0], f.tid[1], f.tid[2], (unsigned long)f.count, file, where);
    text += line;
  }
  for (int i = 0; i < S.nbuffers; i++) {
    const Buffer& b = S.buffers[i];
    if (!b.written) continue;
    uint64_t missing = 0, first = 0;
    for (uintptr_t k = 0; k < b.hi - b.lo; k++)
      if (!b.written[k] && missing++ == 0) first = k;
    if (missing) {
      snprintf(line, sizeof line, "unwritten buffer=%u bytes=%lu first=%lu\n", b.index,
               (unsigned long)missing, (unsigned long)first);
      text += line;
    }
  }
  for (int i = 0; i < S.ngroups; i++) {
    snprintf(line, sizeof line, "threadgroup bytes=%lu declared=%s:%u\n",
             (unsigned long)(S.groups[i].hi - S.groups[i].lo), S.groups[i].file, S.groups[i].line);
    text += line;
  }
  if (S.dropped) {
    snprintf(line, sizeof line, "dropped count=%lu\n", (unsigned long)S.dropped);
    text += line;
  }
  snprintf(out, len, "%s", text.c_str());
  return (int)text.size();
}

#endif  // KIR_EMU_CHECK_H
