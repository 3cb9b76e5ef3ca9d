/* crash_trace: a preloadable fatal-signal reporter for machines without a debugger (the lent GPU
 * machine has no gdb, and cuda-gdb is too slow to start inside a short lease).
 *
 *   cc -shared -fPIC -O1 -o crash_trace.so tools/debug/crash_trace.c
 *   LD_PRELOAD=$PWD/crash_trace.so python3 repro.py
 *
 * On SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT it writes the signal, the faulting address, the
 * thread, a native backtrace and the executable mappings (to turn addresses into file offsets for
 * addr2line) to stderr, then re-raises the signal with its default action so the exit status and
 * any core dump stay as they were. Handlers installed later (Python's faulthandler) run first and
 * chain to this one. Only async-signal-safe calls after the first line: write, backtrace_symbols_fd
 * (backtrace itself is primed at load so it does not allocate in the handler). */
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <unistd.h>

static void put(const char* s) {
  ssize_t r = write(2, s, strlen(s));
  (void)r;
}

static void put_hex(uintptr_t v) {
  char buf[2 + 16 + 1];
  int i = (int)sizeof buf - 1;
  buf[i] = '\0';
  do {
    buf[--i] = "0123456789abcdef"[v & 15u];
    v >>= 4;
  } while (v != 0 && i > 2);
  buf[--i] = 'x';
  buf[--i] = '0';
  put(buf + i);
}

static void put_dec(long v) {
  char buf[24];
  int i = (int)sizeof buf - 1;
  buf[i] = '\0';
  int neg = v < 0;
  unsigned long u = neg ? (unsigned long)(-v) : (unsigned long)v;
  do {
    buf[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (neg) buf[--i] = '-';
  put(buf + i);
}

/* Copies the executable lines of /proc/self/maps to stderr. */
static void put_maps(void) {
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd < 0) return;
  char buf[8192], line[1024];
  size_t len = 0;
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      if (len < sizeof line - 1) line[len++] = buf[i];
      if (buf[i] != '\n') continue;
      line[len] = '\0';
      if (strstr(line, " r-xp ") != NULL) put(line);
      len = 0;
    }
  }
  close(fd);
}

static void on_fatal(int sig, siginfo_t* info, void* uctx) {
  put("\n=== crash_trace: signal ");
  put_dec(sig);
  put(" (");
  put(strsignal(sig));
  put(") at address ");
  put_hex((uintptr_t)info->si_addr);
  put(" code ");
  put_dec(info->si_code);
  put(" in thread ");
  put_dec((long)syscall(SYS_gettid));
  put(" (pid ");
  put_dec((long)getpid());
  put(")\n");
#if defined(__x86_64__)
  /* The faulting instruction and the words at the top of its stack (return addresses among
     them): an answer even where unwinding through the signal frame fails. */
  const ucontext_t* uc = (const ucontext_t*)uctx;
  const uintptr_t rip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
  const uintptr_t* rsp = (const uintptr_t*)uc->uc_mcontext.gregs[REG_RSP];
  put("rip ");
  put_hex(rip);
  put(" rsp ");
  put_hex((uintptr_t)rsp);
  put("\nstack words:");
  for (int i = 0; i < 48 && rsp != NULL; ++i) {
    put(i % 6 == 0 ? "\n " : " ");
    put_hex(rsp[i]);
  }
  put("\n");
#else
  (void)uctx;
#endif
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  put("=== crash_trace: executable mappings\n");
  put_maps();
  put("=== crash_trace: end\n");
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void crash_trace_install(void) {
  void* prime[1];
  backtrace(prime, 1); /* loads libgcc's unwinder now, not inside the handler */
  static char stack[1 << 16];
  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_sp = stack;
  ss.ss_size = sizeof stack;
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; ++i)
    sigaction(sigs[i], &sa, NULL);
}
