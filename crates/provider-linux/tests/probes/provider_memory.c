/* Looks through /proc for a process whose environment block holds
 * MARKER (an entry of the provider's own environment, which no workload
 * process is given) until STOP exists. A command's last supervisor
 * step shares the provider's address space until its execve, and
 * /proc/<pid>/environ reads the environment block of a process's address
 * space, so a hit means the workload reached the provider's memory.
 *
 *   provider_memory MARKER STOP
 *
 * Prints "found: pid N, mem O_RDWR: yes|no" (exit 0) or "not found"
 * (exit 1). Opening /proc/<pid>/mem for writing takes the same access
 * check as environ; either pins the address space it was opened on. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char buf[1 << 20];

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: provider_memory MARKER STOP\n");
        return 2;
    }
    const char *marker = argv[1];
    size_t len = strlen(marker);
    int self = getpid();
    for (;;) {
        DIR *d = opendir("/proc");
        if (!d) return 2;
        struct dirent *e;
        while ((e = readdir(d))) {
            int pid = atoi(e->d_name);
            if (pid <= 1 || pid == self) continue;
            char p[64];
            snprintf(p, sizeof p, "/proc/%d/environ", pid);
            int env = open(p, O_RDONLY);
            if (env < 0) continue;
            snprintf(p, sizeof p, "/proc/%d/mem", pid);
            int mem = open(p, O_RDWR);
            ssize_t n = read(env, buf, sizeof buf);
            close(env);
            if (n > 0 && memmem(buf, (size_t)n, marker, len)) {
                printf("found: pid %d, mem O_RDWR: %s\n", pid, mem >= 0 ? "yes" : "no");
                return 0;
            }
            if (mem >= 0) close(mem);
        }
        closedir(d);
        if (access(argv[2], F_OK) == 0) break;
    }
    printf("not found\n");
    return 1;
}
