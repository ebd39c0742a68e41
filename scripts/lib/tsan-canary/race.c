/* The C half of the canary (scripts/tsan.sh): two threads write one int with no
 * synchronisation; clang's -fsanitize=thread must report it. */
#include <pthread.h>
#include <stdio.h>

static int slot;

static void *writer(void *arg) {
    slot += *(int *)arg;
    return NULL;
}

int main(void) {
    pthread_t t[2];
    int one = 1, two = 2;
    pthread_create(&t[0], NULL, writer, &one);
    pthread_create(&t[1], NULL, writer, &two);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    printf("canary: %d\n", slot);
    return 0;
}
