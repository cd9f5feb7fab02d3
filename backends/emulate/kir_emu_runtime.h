// kir_emu_runtime.h -- run GPU compute kernels on one CPU thread: threadgroups one after another,
// the threads of a group as fibers with real barriers and SIMD-group exchange.
//
// Why fibers: a barrier is then a context switch (tens of ns) instead of an OS wake-up, and the
// scheduler sees every thread's state, so a barrier that not every thread can reach is reported
// at once (exact detection, no timeout). A thread spinning forever is not preemptible: the Python
// side runs launches in a subprocess with a wall-clock limit.
//
// Why groups one after another: a `threadgroup`/`__shared__` array in the kernel body can be a
// function-local static (the Python side rewrites the declarations), shared by exactly the
// threads of the running group. Statics are registered here and poisoned (0xFF bytes: NaN / -1)
// before every group so that reads of memory no thread of the group wrote are visible.
//
// The scheduler and what only a failing launch runs (formatting its message, the array-bounds
// and crash handlers) are declared here and defined in kir_emu_runtime.cpp, compiled once into
// an object that every kernel's shared object links: generated again in each kernel, that code
// was three quarters of the compile time of a small kernel. What stays here is what a kernel's
// own code calls (barriers, SIMD exchange, threadgroup memory), and it formats nothing.
#ifndef KIR_EMU_RUNTIME_H
#define KIR_EMU_RUNTIME_H

#if defined(__APPLE__) && !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 700  // ucontext on macOS
#define _DARWIN_C_SOURCE 1
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(KIR_EMU_UCONTEXT)
#define KIR_EMU_ASM_SWITCH 1
#endif

namespace kir_emu {

constexpr uint32_t SIMD_WIDTH = 32;
constexpr size_t SLOT = 64;  // bytes per lane in a SIMD exchange buffer

// A source position of a barrier or SIMD op (from std::source_location, mapped by #line).
struct Site {
  const char* file = nullptr;
  uint32_t line = 0, col = 0;
  bool operator==(const Site& o) const {
    return line == o.line && col == o.col && (file == o.file || (file && o.file && !strcmp(file, o.file)));
  }
};
inline Site site_of(const std::source_location& l) { return Site{l.file_name(), l.line(), l.column()}; }
// A site in a failure message: KIR_SITE in the format, KIR_SITE_ARGS(s) in the arguments.
#define KIR_SITE "%s:%u"
inline const char* site_file(const Site& s) { return s.file ? s.file : "?"; }
#define KIR_SITE_ARGS(s) ::kir_emu::site_file(s), (s).line

enum class St : uint8_t { Ready, BlockedTG, BlockedSimd, Done };

struct Fiber {
#ifdef KIR_EMU_ASM_SWITCH
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
  St st = St::Ready;
  Site site;
  uint32_t wait_gen = 0;
  uint32_t tid[3] = {0, 0, 0};
  uint32_t lin = 0, lane = 0, sg = 0;
};

struct Simd {
  uint32_t nlanes = 0, arrived = 0, exited = 0, gen = 0;
  Site site;
  bool site_set = false;
  uint32_t present[2] = {0, 0};
  alignas(64) unsigned char buf[2][SIMD_WIDTH][SLOT];
};

struct Runtime {
  const char* kernel = "kernel";
  bool cuda = false;
  uint32_t ngroups[3] = {1, 1, 1}, tg[3] = {1, 1, 1}, gthreads[3] = {1, 1, 1};
  // the running group
  uint32_t gid[3] = {0, 0, 0}, gsize[3] = {1, 1, 1}, nthreads = 0, nsimd = 0;
  uint32_t tg_arrived = 0, tg_exited = 0, tg_gen = 0;
  Site tg_site;
  bool tg_site_set = false;
  std::vector<Simd> simd;
  std::vector<Fiber> fibers;
  uint32_t cur = 0;
  unsigned char* smem = nullptr;
  size_t smem_bytes = 0;
  void (*body)(void*) = nullptr;
  void* arg = nullptr;
  bool failed = false;
  std::string err;
#ifdef KIR_EMU_ASM_SWITCH
  void* sched_sp = nullptr;
#else
  ucontext_t sched_uc;
#endif
};

inline Runtime*& rt() {
  static Runtime* r = nullptr;
  return r;
}
inline Fiber& self() { return rt()->fibers[rt()->cur]; }

// ---------------------------------------------------------------- poisoned threadgroup memory
struct TgRegion { void* p; size_t n; };
inline std::vector<TgRegion>& tg_regions() {
  static std::vector<TgRegion> r;
  return r;
}
#ifdef KIR_EMU_CHECK  // the checked build's hook (kir_emu_check.h)
namespace check {
inline void on_register(void* p, size_t n, const char* file, uint32_t line);
}  // namespace check
#endif
// Run by the scheduler as each group starts: the checked build's (kir_emu_check.h) resets its
// shadow of the group's memory. A hook, not a call, because the scheduler is compiled once
// without the checked build's flags (kir_emu_runtime.cpp).
inline void (*&group_start_hook())() {
  static void (*hook)() = nullptr;
  return hook;
}
// Called once per static threadgroup array (from its `static bool` initialiser, on the
// declaration's line: the default argument names it).
inline bool register_tg(void* p, size_t n, std::source_location at = std::source_location::current()) {
  tg_regions().push_back({p, n});
  memset(p, 0xFF, n);
#ifdef KIR_EMU_CHECK
  check::on_register(p, n, at.file_name(), at.line());
#else
  (void)at;
#endif
  return true;
}

// ---------------------------------------------------------------- context switching
#ifdef KIR_EMU_ASM_SWITCH
// Save callee-saved registers and the SSE/x87 control words on the current stack, store the
// stack pointer in *save, load `next`, restore, return into the other fiber.
__attribute__((naked, noinline)) static void switch_stack(void** /*save*/, void* /*next*/) {
  asm volatile(
      "pushq %rbp\n pushq %rbx\n pushq %r12\n pushq %r13\n pushq %r14\n pushq %r15\n"
      "subq $8, %rsp\n stmxcsr (%rsp)\n fnstcw 4(%rsp)\n"
      "movq %rsp, (%rdi)\n movq %rsi, %rsp\n"
      "ldmxcsr (%rsp)\n fldcw 4(%rsp)\n addq $8, %rsp\n"
      "popq %r15\n popq %r14\n popq %r13\n popq %r12\n popq %rbx\n popq %rbp\n"
      "ret\n");
}
#endif

inline void to_scheduler() {
  Runtime& R = *rt();
#ifdef KIR_EMU_ASM_SWITCH
  switch_stack(&R.fibers[R.cur].sp, R.sched_sp);
#else
  swapcontext(&R.fibers[R.cur].uc, &R.sched_uc);
#endif
}

// ---------------------------------------------------------------- failures (kir_emu_runtime.cpp)
// Record the first failure (printf-style message, then where the group's threads are) and
// leave the fiber for good (its stack is simply abandoned).
[[noreturn]] void fail(const char* format, ...) __attribute__((format(printf, 1, 2)));

// ---------------------------------------------------------------- barriers
inline void tg_barrier(Site s) {
  Runtime& R = *rt();
  Fiber& f = self();
  if (!R.tg_site_set) { R.tg_site = s; R.tg_site_set = true; }
  f.site = s;
  if (!(R.tg_site == s)) {
    f.st = St::BlockedTG;
    fail("divergent barrier: one barrier round reached from " KIR_SITE " and " KIR_SITE,
         KIR_SITE_ARGS(R.tg_site), KIR_SITE_ARGS(s));
  }
  R.tg_arrived++;
  if (R.tg_exited) {
    f.st = St::BlockedTG;
    fail("barrier at " KIR_SITE " reached while %u thread(s) of the group had returned (barrier in "
         "divergent code)", KIR_SITE_ARGS(s), R.tg_exited);
  }
  if (R.tg_arrived == R.nthreads) {
    R.tg_arrived = 0;
    R.tg_site_set = false;
    R.tg_gen++;
    return;
  }
  f.st = St::BlockedTG;
  f.wait_gen = R.tg_gen;
  to_scheduler();
}

inline void simd_complete(Simd& sd) {
  sd.arrived = 0;
  sd.site_set = false;
  sd.gen++;
  sd.present[sd.gen & 1] = 0;  // the buffer the next op writes: its readers are all done
}

// Exited lanes count as arrived for Metal SIMD ops (they act on the active lanes); CUDA warp
// ops name their lanes in a mask, and a named lane that returned is an error.
inline void simd_barrier(Site s) {
  Runtime& R = *rt();
  Fiber& f = self();
  Simd& sd = R.simd[f.sg];
  if (!sd.site_set) { sd.site = s; sd.site_set = true; }
  f.site = s;
  if (!(sd.site == s)) {
    f.st = St::BlockedSimd;
    fail("divergent SIMD op: one SIMD-group round reached from " KIR_SITE " and " KIR_SITE
         " (SIMD ops must be called by all active lanes together)", KIR_SITE_ARGS(sd.site),
         KIR_SITE_ARGS(s));
  }
  sd.arrived++;
  if (sd.exited && R.cuda) {
    f.st = St::BlockedSimd;
    fail("warp op at " KIR_SITE " reached while %u lane(s) of the warp had returned",
         KIR_SITE_ARGS(s), sd.exited);
  }
  if (sd.arrived + sd.exited == sd.nlanes) { simd_complete(sd); return; }
  f.st = St::BlockedSimd;
  f.wait_gen = sd.gen;
  to_scheduler();
}

// ---------------------------------------------------------------- SIMD exchange
// Op g writes buffer g&1 and reads it after the SIMD barrier; nobody writes that buffer again
// before op g+2, which cannot complete before every lane has finished reading op g.
struct Exchange {
  Simd* s;
  uint32_t p, mask, lane;
};
template <class T>
inline Exchange simd_exchange(const T& v, Site site) {
  static_assert(sizeof(T) <= SLOT, "type too large for a SIMD exchange");
  Fiber& f = self();
  Simd& sd = rt()->simd[f.sg];
  uint32_t p = sd.gen & 1;
  memcpy(sd.buf[p][f.lane], &v, sizeof(T));
  sd.present[p] |= 1u << f.lane;
  simd_barrier(site);
  return Exchange{&sd, p, sd.present[p], f.lane};
}
// What a lane reads from `lane` in an exchange: its value, or for a lane out of range or not
// taking part, `fallback` -- except a float read from a lane of the group that returned
// before a Metal SIMD op (undefined; CUDA's emulation stops there), which is NaN as kir's
// interpreter reads it (kir/interp/state.py), so a result that uses it fails its check.
template <class T>
inline T xread(const Exchange& e, uint32_t lane, const T& fallback) {
  if (lane >= SIMD_WIDTH) return fallback;
  if (!(e.mask >> lane & 1u)) {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, _Float16>)
      if (lane < e.s->nlanes) return static_cast<T>(NAN);
    return fallback;
  }
  T r;
  memcpy(&r, e.s->buf[e.p][lane], sizeof(T));
  return r;
}

// ---------------------------------------------------------------- launch ABI
// One kernel argument as passed from Python (pointers for buffers, numbers for scalars).
struct Arg {
  int64_t i;
  double f;
  void* p;
  int32_t kind;  // 0 pointer, 1 integer, 2 floating point, 3 a struct's bytes at p
  int32_t pad;
};
// dims: ngroups[3], threads per group[3], threads per grid[3] (a Metal edge group may be partial).
// Runs the whole grid; returns 0, or 1 with the failure's message in err (kir_emu_runtime.cpp).
int launch(const char* kernel, bool cuda, void (*body)(void*), void* arg, const uint32_t* dims,
           uint64_t smem_bytes, uint64_t stack_kib, char* err, uint64_t errlen);

}  // namespace kir_emu

#define KIR_EMU_EXPORT extern "C" __attribute__((visibility("default")))

#ifdef KIR_EMU_CHECK
#include "kir_emu_check.h"
#endif

#endif  // KIR_EMU_RUNTIME_H
