/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fd-util.h"
#include "image.h"

/* Kept layers (sysextd(8), KEPT LAYERS): the image mounts of the live trees, kept between runs
 * of `sysextd --no-bus` in a mount namespace of their own, pinned at run/sysextd/layers, so
 * that the next run reuses those of the files it finds again, as the daemon reuses its own
 * (layers.c says how and why). */

/* Whether an image's mount may be kept: a compatible raw image with content for a hierarchy.
 * A directory is not: its bind mount costs nothing to make again.  (Mount attributes are the
 * caller's to judge: only mounts made without any are kept.)  Pure. */
bool layers_image_eligible(const Image *img);

/* "l/DEV-INO": where the mount of an image whose file has this identity is kept, inside the
 * namespace.  buf must hold LAYERS_NAME_MAX bytes. */
#define LAYERS_NAME_MAX 48
const char *layers_name(const struct stat *st, char buf[static LAYERS_NAME_MAX]);

/* The namespace kept under the journal directory run/sysextd, when it is ours by the recorded
 * identity and was kept from the trees of generation (the live one): returns 1 with *ret_ns
 * (O_RDONLY, a mount namespace), 0 when there is none.  One kept from another generation's
 * trees is dropped. */
int layers_open(int journal_fd, uint64_t generation, int *ret_ns);

/* The kept mounts of the images recorded in the journal (records) whose files discovery found
 * again with the same identity (found): a list of the records (borrowed: not to be freed with
 * image_list_free(), see layers_fetched_free()) with root_fd set to a detached clone of each
 * one's kept mount, for the engine's image cache.  A record whose mount is not there is left
 * out; when the namespace cannot be entered, all are.  Fails only when this process could not
 * return to its own namespace. */
int layers_fetch(int ns, const ImageList *records, const ImageList *found, ImageList *ret);
void layers_fetched_free(ImageList *l);

/* The kept mounts of files that discovery no longer found (replaced: a new file has another
 * name; or removed) go on a thread of their own while the staging worker builds the new trees:
 * a detach waits for an RCU grace period, which the transition need not wait for.  (The names
 * of all images found are spared, those layers_keep() keeps among them: the two never act on
 * the same name; layers_keep() drops the other spared ones after the swap.)  The trees still live
 * hold references of their own to those file systems, so their end (for erofs a backing device
 * unregistered, another grace period: 0.5 ms for one image here) comes with the old trees' after
 * the swap, also on a thread (execute.h, old_trees).  The thread enters the namespace (ns,
 * duplicated; only if it is one the staging worker made, as ns_enter() checks) and detaches
 * every mount under l/ whose name is none of the images';
 * The caller waits for it once the staging worker answered (layers_sweep_finish(), a no-op when
 * none was started), and layers_keep() drops whatever a sweep that could not run left. */
typedef struct LayersSweep {
        int ns;
        char (*keep)[LAYERS_NAME_MAX];
        size_t n_keep;
        bool started;
        pthread_t thread;
} LayersSweep;
void layers_sweep_start(LayersSweep *s, int ns, const Image *images, size_t n);
void layers_sweep_finish(LayersSweep *s);

/* Keeps the mounts of images (each eligible, mounted without attributes, root_fd the root of
 * its detached mount or of a clone fetched above, or a clone let go: kept_dev), the trees of
 * generation, in ns and drops
 * every other kept mount.  A mount kept already for that file is left as it is.  fresh: ns is
 * a new, empty namespace (the staging worker's, staging.h), pinned here and recorded.  On
 * failure nothing is kept: the namespace is dropped.  (A process that could not return from
 * the namespace aborts: nothing may go on in it.)  root: the root's path, for messages.
 * (A sweep started for these trees was waited for before: layers_sweep_finish().) */
int layers_keep(int journal_fd, const char *root, int ns, bool fresh, uint64_t generation, Image *const *images, size_t n);

/* The clones of kept mounts are anonymous mount namespaces of their own, each dissolved when
 * its last fd goes, and each such dissolution waits for an RCU grace period: closing 50 took
 * 0.35-2 ms here, one after the other.  Once the staging worker built the new trees (whose
 * overlays hold private clones of their layers), the images' clones are let go on a thread of
 * their own while the transition goes on: each image's root_fd that is such a clone is closed
 * there (fd-util.h, FdRelease), its kept_dev set for layers_keep().  fd_release_finish() waits
 * for the thread (called before the transition returns; a no-op when nothing was started). */
void layers_release_start(FdRelease *rel, Image *images, size_t n);

/* Drops the kept layers: the pinned namespace is detached if it is ours by the recorded
 * identity, and its record removed.  Returns 1 when one was detached, 0 when there was none. */
int layers_drop(int journal_fd);
