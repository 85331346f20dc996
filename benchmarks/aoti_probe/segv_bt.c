// LD_PRELOAD'ed on the GPU machine (no gdb there): on SIGSEGV print the native
// stack as "frame <object> <offset>" lines for addr2line, then die as before.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static void handler(int sig, siginfo_t *si, void *uc) {
  void *frames[64];
  int n = backtrace(frames, 64);
  fprintf(stderr, "SEGV_BT signal %d at address %p, %d frames\n", sig, si->si_addr, n);
  for (int i = 0; i < n; i++) {
    Dl_info info;
    if (dladdr(frames[i], &info) && info.dli_fname) {
      fprintf(stderr, "frame %s 0x%lx %s\n", info.dli_fname,
              (unsigned long)((char *)frames[i] - (char *)info.dli_fbase),
              info.dli_sname ? info.dli_sname : "?");
    } else {
      fprintf(stderr, "frame ? %p ?\n", frames[i]);
    }
  }
  fflush(stderr);
  signal(sig, SIG_DFL);
  raise(sig);
}
__attribute__((constructor)) static void install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, NULL);
}
