/*
 * libdlami-memlock.so: used ONLY when the machine running the simulation
 * cannot raise RLIMIT_MEMLOCK (no CAP_SYS_RESOURCE, e.g. inside a container),
 * so sshd cannot really get the DLAMI's unlimited memlock. Preloaded through
 * the chroot's /etc/ld.so.preload, it makes getrlimit/prlimit reads of
 * RLIMIT_MEMLOCK report the value in /run/dlami-sim/memlock ("unlimited" or
 * bytes). Everything else passes through to the real calls.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/resource.h>

static int simulated(struct rlimit64 *out) {
	FILE *f = fopen("/run/dlami-sim/memlock", "re");
	char buf[64] = {0};
	if (!f) return 0;
	if (!fgets(buf, sizeof buf, f)) { fclose(f); return 0; }
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	if (strcmp(buf, "unlimited") == 0) {
		out->rlim_cur = out->rlim_max = RLIM64_INFINITY;
	} else {
		char *end;
		unsigned long long v = strtoull(buf, &end, 10);
		if (end == buf) return 0;
		out->rlim_cur = out->rlim_max = v;
	}
	return 1;
}

int getrlimit(__rlimit_resource_t res, struct rlimit *rl) {
	static int (*real)(__rlimit_resource_t, struct rlimit *);
	struct rlimit64 s;
	if (res == RLIMIT_MEMLOCK && simulated(&s)) {
		rl->rlim_cur = s.rlim_cur == RLIM64_INFINITY ? RLIM_INFINITY : (rlim_t)s.rlim_cur;
		rl->rlim_max = s.rlim_max == RLIM64_INFINITY ? RLIM_INFINITY : (rlim_t)s.rlim_max;
		return 0;
	}
	if (!real) real = dlsym(RTLD_NEXT, "getrlimit");
	return real(res, rl);
}

int getrlimit64(__rlimit_resource_t res, struct rlimit64 *rl) {
	static int (*real)(__rlimit_resource_t, struct rlimit64 *);
	if (res == RLIMIT_MEMLOCK && simulated(rl)) return 0;
	if (!real) real = dlsym(RTLD_NEXT, "getrlimit64");
	return real(res, rl);
}

int prlimit64(pid_t pid, __rlimit_resource_t res, const struct rlimit64 *nl, struct rlimit64 *ol) {
	static int (*real)(pid_t, __rlimit_resource_t, const struct rlimit64 *, struct rlimit64 *);
	if (res == RLIMIT_MEMLOCK && nl == NULL && ol && (pid == 0) && simulated(ol)) return 0;
	if (!real) real = dlsym(RTLD_NEXT, "prlimit64");
	return real(pid, res, nl, ol);
}

int prlimit(pid_t pid, __rlimit_resource_t res, const struct rlimit *nl, struct rlimit *ol) {
	struct rlimit64 s;
	static int (*real)(pid_t, __rlimit_resource_t, const struct rlimit *, struct rlimit *);
	if (res == RLIMIT_MEMLOCK && nl == NULL && ol && pid == 0 && simulated(&s)) {
		ol->rlim_cur = s.rlim_cur == RLIM64_INFINITY ? RLIM_INFINITY : (rlim_t)s.rlim_cur;
		ol->rlim_max = s.rlim_max == RLIM64_INFINITY ? RLIM_INFINITY : (rlim_t)s.rlim_max;
		return 0;
	}
	if (!real) real = dlsym(RTLD_NEXT, "prlimit");
	return real(pid, res, nl, ol);
}
