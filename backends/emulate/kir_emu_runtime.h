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
inline std::string site_str(const Site& s) {
  return std::string(s.file ? s.file : "?") + ":" + std::to_string(s.line);
}

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
#ifdef KIR_EMU_CHECK  // the checked build's hooks (kir_emu_check.h)
namespace check {
inline void on_register(void* p, size_t n, const char* file, uint32_t line);
inline void on_group_start();
}  // namespace check
#endif
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

// Fiber stacks: mmap'd with a guard page below (a stack overflow faults instead of corrupting a
// neighbour), kept across groups and launches.
struct Stacks {
  std::vector<char*> base;
  size_t bytes = 0;
  char* get(uint32_t i, size_t want) {
    if (want != bytes) {
      for (char* b : base) munmap(b, bytes + 4096);
      base.clear();
      bytes = want;
    }
    while (base.size() <= i) {
      void* m = mmap(nullptr, bytes + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
      if (m == MAP_FAILED) return nullptr;
      mprotect(m, 4096, PROT_NONE);
      base.push_back(static_cast<char*>(m));
    }
    return base[i] + 4096;
  }
};
inline Stacks& stacks() {
  static Stacks s;
  return s;
}

inline void to_scheduler() {
  Runtime& R = *rt();
#ifdef KIR_EMU_ASM_SWITCH
  switch_stack(&R.fibers[R.cur].sp, R.sched_sp);
#else
  swapcontext(&R.fibers[R.cur].uc, &R.sched_uc);
#endif
}

// ---------------------------------------------------------------- failures
inline std::string group_str(const Runtime& R) {
  return "(" + std::to_string(R.gid[0]) + "," + std::to_string(R.gid[1]) + "," + std::to_string(R.gid[2]) + ")";
}
// Where the threads of the group are, as ranges of linear thread ids per (state, line).
inline std::string describe_threads(const Runtime& R) {
  std::string out;
  std::vector<bool> seen(R.nthreads, false);
  for (uint32_t i = 0; i < R.nthreads; i++) {
    if (seen[i]) continue;
    const Fiber& a = R.fibers[i];
    std::vector<uint32_t> ids;
    for (uint32_t j = i; j < R.nthreads; j++) {
      const Fiber& b = R.fibers[j];
      bool same = b.st == a.st && (a.st == St::Ready || a.st == St::Done || b.site == a.site);
      if (!seen[j] && same) { seen[j] = true; ids.push_back(j); }
    }
    const char* what = a.st == St::Done ? "returned" : a.st == St::BlockedTG ? "wait at a threadgroup barrier"
                     : a.st == St::BlockedSimd ? "wait at a SIMD op" : "are running";
    out += "    " + std::to_string(ids.size()) + " thread(s) " + what;
    if (a.st == St::BlockedTG || a.st == St::BlockedSimd) out += " (" + site_str(a.site) + ")";
    out += ": ";
    for (size_t k = 0; k < ids.size();) {
      size_t m = k;
      while (m + 1 < ids.size() && ids[m + 1] == ids[m] + 1) m++;
      out += std::to_string(ids[k]) + (m > k ? "-" + std::to_string(ids[m]) : "") + (m + 1 < ids.size() ? "," : "");
      k = m + 1;
    }
    out += "\n";
  }
  return out;
}
// Record the first failure and leave the fiber for good (its stack is simply abandoned).
[[noreturn]] inline void fail(const std::string& msg) {
  Runtime& R = *rt();
  if (!R.failed) {
    R.failed = true;
    R.err = "kernel '" + std::string(R.kernel) + "', threadgroup " + group_str(R) + ": " + msg + "\n" +
            describe_threads(R);
  }
  to_scheduler();
  __builtin_unreachable();
}

// ---------------------------------------------------------------- array bounds
// Kernels are compiled with -fsanitize=bounds, and these are its handlers (the UBSan ABI that
// GCC and clang share), defined here so no sanitizer runtime is linked: an index past a
// fixed-size array (threadgroup / __shared__ / a thread's local array) fails the launch at the
// access's line, as the interpreter reports it. Pointers (device buffers) are not covered.
namespace ubsan {
struct SourceLocation { const char* file; uint32_t line; uint32_t column; };
struct TypeDescriptor { uint16_t kind; uint16_t info; char name[1]; };
struct OutOfBoundsData { SourceLocation loc; const TypeDescriptor* array_type; const TypeDescriptor* index_type; };
inline std::string index_text(const TypeDescriptor* type, uintptr_t value) {
  if (type->kind != 0) return "";
  unsigned bits = 1u << (type->info >> 1);
  bool is_signed = type->info & 1;
  if (bits > 64) return "";
  if (is_signed) {
    long long v = (long long)(value << (64 - bits)) >> (64 - bits);
    return std::to_string(v);
  }
  return std::to_string((unsigned long long)(bits == 64 ? value : value & ((1ull << bits) - 1)));
}
}  // namespace ubsan
}  // namespace kir_emu
extern "C" __attribute__((used)) void __ubsan_handle_out_of_bounds(kir_emu::ubsan::OutOfBoundsData* d, uintptr_t index) {
  std::string type = d->array_type->name;
  std::string where = std::string(d->loc.file ? d->loc.file : "?") + ":" + std::to_string(d->loc.line) +
                      ":" + std::to_string(d->loc.column);
  std::string what = type.find("][") == std::string::npos
      ? "index " + kir_emu::ubsan::index_text(d->index_type, index) + " is out of bounds for " + type
      : "an index is out of bounds for " + type;
  kir_emu::fail("out-of-bounds array access at " + where + ": " + what);
}
extern "C" __attribute__((used)) void __ubsan_handle_out_of_bounds_abort(kir_emu::ubsan::OutOfBoundsData* d, uintptr_t index) {
  __ubsan_handle_out_of_bounds(d, index);
}
namespace kir_emu {

// ---------------------------------------------------------------- barriers
inline void tg_barrier(Site s) {
  Runtime& R = *rt();
  Fiber& f = self();
  if (!R.tg_site_set) { R.tg_site = s; R.tg_site_set = true; }
  f.site = s;
  if (!(R.tg_site == s)) {
    f.st = St::BlockedTG;
    fail("divergent barrier: one barrier round reached from " + site_str(R.tg_site) + " and " + site_str(s));
  }
  R.tg_arrived++;
  if (R.tg_exited) {
    f.st = St::BlockedTG;
    fail("barrier at " + site_str(s) + " reached while " + std::to_string(R.tg_exited) +
         " thread(s) of the group had returned (barrier in divergent code)");
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
    fail("divergent SIMD op: one SIMD-group round reached from " + site_str(sd.site) + " and " + site_str(s) +
         " (SIMD ops must be called by all active lanes together)");
  }
  sd.arrived++;
  if (sd.exited && R.cuda) {
    f.st = St::BlockedSimd;
    fail("warp op at " + site_str(s) + " reached while " + std::to_string(sd.exited) +
         " lane(s) of the warp had returned");
  }
  if (sd.arrived + sd.exited == sd.nlanes) { simd_complete(sd); return; }
  f.st = St::BlockedSimd;
  f.wait_gen = sd.gen;
  to_scheduler();
}

inline void thread_exit() {
  Runtime& R = *rt();
  Fiber& f = self();
  f.st = St::Done;
  R.tg_exited++;
  Simd& sd = R.simd[f.sg];
  sd.exited++;
  if (R.tg_arrived)
    fail("a thread returned while " + std::to_string(R.tg_arrived) + " thread(s) wait at the barrier at " +
         site_str(R.tg_site) + " (barrier in divergent code)");
  if (sd.arrived) {
    if (R.cuda) fail("a lane returned while other lanes of its warp wait at " + site_str(sd.site));
    if (sd.arrived + sd.exited == sd.nlanes) simd_complete(sd);
  }
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
template <class T>
inline T xread(const Exchange& e, uint32_t lane, const T& fallback) {
  if (lane >= SIMD_WIDTH || !(e.mask >> lane & 1u)) return fallback;
  T r;
  memcpy(&r, e.s->buf[e.p][lane], sizeof(T));
  return r;
}

// ---------------------------------------------------------------- scheduler
#ifdef KIR_EMU_ASM_SWITCH
[[noreturn]] inline void fiber_main() {
#else
inline void fiber_main() {
#endif
  Runtime& R = *rt();
  R.body(R.arg);
  thread_exit();
  to_scheduler();
  __builtin_unreachable();
}

inline bool start_fiber(Runtime& R, uint32_t w, size_t stack_bytes) {
  char* stack = stacks().get(w, stack_bytes);
  if (!stack) return false;
  Fiber& f = R.fibers[w];
#ifdef KIR_EMU_ASM_SWITCH
  uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + stack_bytes) & ~uintptr_t(15);
  uint64_t* slot = reinterpret_cast<uint64_t*>(top - 16);
  slot[1] = 0;  // no caller
  slot[0] = reinterpret_cast<uint64_t>(&fiber_main);
  uint64_t* sp = slot - 7;  // six callee-saved registers + the control-word slot
  for (int i = 1; i < 7; i++) sp[i] = 0;
  uint32_t csr = 0x1F80;
  uint16_t fcw = 0x037F;
  memcpy(sp, &csr, 4);
  memcpy(reinterpret_cast<char*>(sp) + 4, &fcw, 2);
  f.sp = sp;
#else
  getcontext(&f.uc);
  f.uc.uc_stack.ss_sp = stack;
  f.uc.uc_stack.ss_size = stack_bytes;
  f.uc.uc_link = &R.sched_uc;
  makecontext(&f.uc, (void (*)())fiber_main, 0);
#endif
  f.st = St::Ready;
  return true;
}

inline void setup_group(Runtime& R, uint32_t linear) {
  R.gid[0] = linear % R.ngroups[0];
  R.gid[1] = (linear / R.ngroups[0]) % R.ngroups[1];
  R.gid[2] = linear / (R.ngroups[0] * R.ngroups[1]);
  for (int d = 0; d < 3; d++) R.gsize[d] = std::min(R.tg[d], R.gthreads[d] - R.gid[d] * R.tg[d]);
  R.nthreads = R.gsize[0] * R.gsize[1] * R.gsize[2];
  R.nsimd = (R.nthreads + SIMD_WIDTH - 1) / SIMD_WIDTH;
  R.tg_arrived = R.tg_exited = 0;
  R.tg_site_set = false;
  for (uint32_t s = 0; s < R.nsimd; s++) {
    Simd& sd = R.simd[s];
    sd.nlanes = std::min(SIMD_WIDTH, R.nthreads - s * SIMD_WIDTH);
    sd.arrived = sd.exited = 0;
    sd.site_set = false;
    sd.present[0] = sd.present[1] = 0;
  }
  if (R.smem) memset(R.smem, 0xFF, R.smem_bytes);
  for (auto& r : tg_regions()) memset(r.p, 0xFF, r.n);
#ifdef KIR_EMU_CHECK
  check::on_group_start();
#endif
  for (uint32_t w = 0; w < R.nthreads; w++) {
    Fiber& f = R.fibers[w];
    f.tid[0] = w % R.gsize[0];
    f.tid[1] = (w / R.gsize[0]) % R.gsize[1];
    f.tid[2] = w / (R.gsize[0] * R.gsize[1]);
    f.lin = w;
    f.lane = w % SIMD_WIDTH;
    f.sg = w / SIMD_WIDTH;
  }
}

// Where the running fiber is, for a crash handler: plain stores before each fiber runs (a
// formatted note there cost more than the kernels themselves), formatted only on a fault.
struct CrashWhere {
  const char* kernel = "";
  uint32_t group[3] = {0, 0, 0};
  uint32_t thread[3] = {0, 0, 0};
};
inline CrashWhere& crash_where() {
  static CrashWhere w;
  return w;
}
// Async-signal-safe writers (no snprintf in a signal handler).
inline void crash_put(const char* s) {
  ssize_t r = write(2, s, strlen(s));
  (void)r;
}
inline void crash_put(uint32_t v) {
  char digits[12];
  int n = 0;
  do { digits[n++] = char('0' + v % 10); v /= 10; } while (v);
  char out[12];
  for (int k = 0; k < n; k++) out[k] = digits[n - 1 - k];
  out[n] = 0;
  crash_put(out);
}
inline void crash_put(const uint32_t (&xyz)[3]) {
  crash_put("(");
  for (int k = 0; k < 3; k++) {
    crash_put(xyz[k]);
    crash_put(k < 2 ? "," : ")");
  }
}
inline void crash_handler(int sig) {
  const CrashWhere& w = crash_where();
  crash_put("kir-emu: fault in kernel '");
  crash_put(w.kernel);
  crash_put("', threadgroup ");
  crash_put(w.group);
  crash_put(", thread ");
  crash_put(w.thread);
  crash_put("\n");
  signal(sig, SIG_DFL);
  raise(sig);
}
inline void install_crash_handler() {
  static bool done = false;
  if (done) return;
  done = true;
  static std::vector<char> alt(1 << 16);
  stack_t ss{};
  ss.ss_sp = alt.data();
  ss.ss_size = alt.size();
  sigaltstack(&ss, nullptr);
  struct sigaction sa{};
  sa.sa_handler = crash_handler;
  sa.sa_flags = SA_ONSTACK;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) sigaction(sig, &sa, nullptr);
}

// Runs the whole grid. Returns 0, or 1 with R.err set.
inline int run(Runtime& R, size_t stack_bytes) {
  uint32_t maxn = R.tg[0] * R.tg[1] * R.tg[2];
  uint32_t total = R.ngroups[0] * R.ngroups[1] * R.ngroups[2];
  if (maxn == 0 || total == 0) return 0;
  if (maxn > 1024) { R.err = "threadgroup of " + std::to_string(maxn) + " threads (more than 1024)"; return 1; }
  install_crash_handler();
  R.fibers.assign(maxn, Fiber{});
  R.simd.resize((maxn + SIMD_WIDTH - 1) / SIMD_WIDTH);
  Runtime* saved = rt();
  rt() = &R;
  for (uint32_t gi = 0; gi < total && !R.failed; gi++) {
    setup_group(R, gi);
    for (uint32_t w = 0; w < R.nthreads; w++)
      if (!start_fiber(R, w, stack_bytes)) { R.failed = true; R.err = "out of memory for fiber stacks"; break; }
    uint32_t done = 0;
    while (done < R.nthreads && !R.failed) {
      bool progressed = false;
      for (uint32_t w = 0; w < R.nthreads && !R.failed; w++) {
        Fiber& f = R.fibers[w];
        if (f.st == St::Done) continue;
        if (f.st == St::BlockedTG && f.wait_gen == R.tg_gen) continue;
        if (f.st == St::BlockedSimd && f.wait_gen == R.simd[f.sg].gen) continue;
        f.st = St::Ready;
        R.cur = w;
        CrashWhere& where = crash_where();
        where.kernel = R.kernel;
        for (int k = 0; k < 3; k++) where.group[k] = R.gid[k], where.thread[k] = f.tid[k];
#ifdef KIR_EMU_ASM_SWITCH
        switch_stack(&R.sched_sp, f.sp);
#else
        swapcontext(&R.sched_uc, &f.uc);
#endif
        progressed = true;
        if (f.st == St::Done) done++;
      }
      if (!progressed && !R.failed) {
        R.failed = true;
        R.err = "kernel '" + std::string(R.kernel) + "', threadgroup " + group_str(R) +
                ": deadlock: every thread waits at a barrier or SIMD op that the others never reach\n" +
                describe_threads(R);
      }
    }
  }
  rt() = saved;
  return R.failed ? 1 : 0;
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
// dims: ngroups[3], threads per group[3], threads per grid[3] (a Metal edge group may be partial)
inline int launch(const char* kernel, bool cuda, void (*body)(void*), void* arg, const uint32_t* dims,
                  uint64_t smem_bytes, uint64_t stack_kib, char* err, uint64_t errlen) {
  Runtime R;
  R.kernel = kernel;
  R.cuda = cuda;
  for (int d = 0; d < 3; d++) {
    R.ngroups[d] = dims[d];
    R.tg[d] = std::max<uint32_t>(1, dims[3 + d]);
    R.gthreads[d] = dims[6 + d];
  }
  std::vector<unsigned char> smem(smem_bytes + 64);
  if (smem_bytes) {
    R.smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem.data()) + 63) & ~uintptr_t(63));
    R.smem_bytes = smem_bytes;
  }
  R.body = body;
  R.arg = arg;
  int rc = run(R, size_t(stack_kib) * 1024);
  if (rc && errlen) snprintf(err, errlen, "%s", R.err.c_str());
  return rc;
}

}  // namespace kir_emu

#define KIR_EMU_EXPORT extern "C" __attribute__((visibility("default")))

#ifdef KIR_EMU_CHECK
#include "kir_emu_check.h"
#endif

#endif  // KIR_EMU_RUNTIME_H
