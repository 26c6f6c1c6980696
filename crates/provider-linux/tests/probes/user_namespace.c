#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/sched.h>
/* Tries to make a user namespace with clone and with clone3 and prints
 * what each gave; then starts a thread (the C library tries clone3 first
 * and falls back to clone on ENOSYS) and prints whether it ran. */
#include <pthread.h>
static void *ran(void *arg) { return arg; }
int main(void) {
    long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (r == 0) _exit(0);
    if (r > 0) { waitpid((pid_t)r, 0, 0); printf("clone: made\n"); } else printf("clone: %s\n", strerrorname_np(errno));
    struct clone_args a; memset(&a, 0, sizeof a); a.flags = CLONE_NEWUSER; a.exit_signal = SIGCHLD;
    r = syscall(SYS_clone3, &a, sizeof a);
    if (r == 0) _exit(0);
    if (r > 0) { waitpid((pid_t)r, 0, 0); printf("clone3: made\n"); } else printf("clone3: %s\n", strerrorname_np(errno));
    pthread_t t;
    void *back = 0;
    int e = pthread_create(&t, 0, ran, (void *)1);
    if (e == 0 && pthread_join(t, &back) == 0 && back == (void *)1) printf("thread: ran\n");
    else printf("thread: %s\n", strerrorname_np(e));
    return 0;
}
