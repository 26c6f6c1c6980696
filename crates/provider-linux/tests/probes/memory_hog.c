/* Forks CHILDREN children that each allocate and touch MIB MiB, hold it
 * for SECONDS and check it is still there; waits for them all.
 *
 *   memory_hog CHILDREN MIB SECONDS
 *
 * Prints "killed K of N" (K: children ended by a signal, the memory
 * cgroup's OOM killer's SIGKILL) and exits 0; exit 2 on a usage error.
 * Each byte is read back after the wait, so the compiler cannot drop the
 * allocation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: memory_hog CHILDREN MIB SECONDS\n");
        return 2;
    }
    int children = atoi(argv[1]), secs = atoi(argv[3]);
    size_t bytes = (size_t)atoi(argv[2]) << 20;
    for (int i = 0; i < children; i++) {
        pid_t p = fork();
        if (p < 0) {
            perror("fork");
            children = i;
            break;
        }
        if (p == 0) {
            volatile char *b = malloc(bytes);
            if (b == NULL)
                _exit(3);
            memset((char *)b, 1, bytes);
            sleep(secs);
            for (size_t j = 0; j < bytes; j += 4096)
                if (b[j] != 1)
                    _exit(4);
            _exit(0);
        }
    }
    int killed = 0, status;
    while (wait(&status) > 0)
        if (WIFSIGNALED(status))
            killed++;
    printf("killed %d of %d\n", killed, children);
    return 0;
}
