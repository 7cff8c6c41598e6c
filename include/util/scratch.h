/* scratch: where a short-lived cJSON tree (one list page of hundreds of objects) is parsed, apart
 * from the heap. A region is reserved with mmap and handed out by bumping a pointer; frees of its
 * pieces cost nothing, and the whole region goes back to the system at once. Parsed in the heap,
 * such a tree's nodes interleave with the records decoded from it, and once the tree is freed the
 * records pin its pages: the heap keeps the high-water mark of the biggest page for good.
 * Single-threaded: one region at most is in use for new allocations at a time. */
#ifndef MP_UTIL_SCRATCH_H
#define MP_UTIL_SCRATCH_H

#include <stdbool.h>
#include <stddef.h>

typedef struct scratch scratch;

/* Routes cJSON's allocations through scratch_malloc and scratch_free (cJSON_InitHooks); once per
 * process, later calls do nothing. Without a region in use they are malloc and free. */
void scratch_install(void);

/* A region of room for at least size bytes (address space only: pages are taken as touched).
 * NULL when the reservation fails: then allocations stay in the heap. */
scratch *scratch_new(size_t size);
/* From now on cJSON allocates in s (NULL: in the heap again). Once s is full, in the heap. */
void scratch_use(scratch *s);
/* Empties s for reuse (one watch event after another): every pointer into it must be gone. The
 * pages beyond keep_bytes go back to the system. NULL is a no-op. */
void scratch_reset(scratch *s, size_t keep_bytes);
/* Unmaps s. Every pointer into it must be gone (freed or never to be used). NULL is a no-op. */
void scratch_free(scratch *s);

/* The hooks themselves: malloc in the region in use (or the heap), and free that ignores pointers
 * into a live region. */
void *scratch_malloc(size_t size);
void scratch_free_ptr(void *p);
/* Whether p points into a live region; bytes handed out of s so far. For tests. */
bool scratch_owns(const void *p);
size_t scratch_used(const scratch *s);

#endif
