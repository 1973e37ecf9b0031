/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "image-class.h"
#include "image-kind.h"
#include "loopdev.h"
#include "release.h"
#include "verity.h"

/* Extension images: discovery in the search directories, recognition by content, and the
 * probe that opens an image and decides whether it may be merged. */

typedef enum ImageVerdict {
        IMAGE_UNPROBED,
        IMAGE_COMPATIBLE,   /* may be merged */
        IMAGE_INCOMPATIBLE, /* built for another OS, version or architecture: skipped quietly */
        IMAGE_REFUSED,      /* broken, unreadable or not allowed: skipped with a warning */
        _IMAGE_VERDICT_MAX,
} ImageVerdict;

/* Hierarchies an image can extend; bit i stands for hierarchy i of the context's list. */
#define HIERARCHIES_MAX 8

/* Longest image name, as for a file name. */
#define IMAGE_NAME_MAX 255

/* What an image's mount is made from.  An erofs image is mounted straight from its file where
 * the kernel can (file-backed erofs, Linux 6.12+, and a file system that serves page-cache
 * reads: not tmpfs or overlayfs): no loop device.  Everything else that is a file goes
 * through a loop device (dm-verity needs a block device). */
typedef enum ImageBacking {
        IMAGE_BACKING_NONE,      /* not mounted (yet), or recorded before this was kept */
        IMAGE_BACKING_DIRECTORY, /* a bind of the directory */
        IMAGE_BACKING_LOOP,      /* a loop device over the file */
        IMAGE_BACKING_FILE,      /* the file itself (erofs) */
        _IMAGE_BACKING_MAX,
} ImageBacking;

const char *image_backing_to_string(ImageBacking b);
int image_backing_from_string(const char *s);

typedef struct Image {
        ImageClass klass;
        char *name;     /* "foo" for foo.raw or the directory foo */
        char *path;     /* as shown to people: ROOT/var/lib/extensions/foo.raw */
        char *rel;      /* below the root, where it is opened from: var/lib/extensions/foo.raw */
        char *version;  /* of an entry of a version directory (NAME.v/NAME_VERSION...), else NULL */
        bool picked;    /* discovery with every version: the entry a plain discovery picks */
        ImageKind kind;
        struct stat st; /* identity: st_dev, st_ino, size and mtime */
        uint64_t stamp; /* directories: a hash over every entry's inode, size and times;
                         * raw images: over their sidecars */

        ImageVerdict verdict;
        char *reason;           /* why not compatible, for people */
        bool refused_by_policy; /* refused by ImagePolicy= or the trusted certificates, not
                                 * because it is broken: a refresh takes it out of the tree */

        int root_fd;        /* directory fd, or fd of the root of the detached image mount */
        LoopDevice *loop;   /* for raw images mounted through a loop device */
        ImageBacking backing; /* what the mount is made from; kept in the journal */
        /* The loop device the image was attached to, and its disk sequence number right after
         * the attach (0 and 0: none: a directory, or an erofs mounted straight from its file).
         * Kept in the journal and the daemon's cache, after the probe has let go of the device:
         * what the daemon watches while the image is merged (watch.h). */
        uint64_t loop_devnum;
        uint64_t loop_diskseq;
        unsigned hierarchies; /* bit mask of hierarchies the image has content for */

        char *fstype;       /* file system mounted (for a disk image: of its partition) */
        bool usr_partition; /* disk image with a usr partition: its root is the image's usr/ */
        VerityMode verity;
        bool signed_valid;  /* a root hash signature checked against the trusted certificates */
        /* The dm-verity root hash (lowercase hex), NULL when none is known.  Probed: the one the
         * image was verified against (a disk image's from its partitions or its sidecar), kept
         * in the journal.  Discovered: the one NAME.roothash gives when NAME.verity is beside it
         * (raw images only), with signature_sidecar saying whether NAME.roothash.p7s is too. */
        char *roothash;
        bool signature_sidecar;
        /* Discovery listed the directory and no sidecar of it was there: the probe of the same
         * run need not look again (false: look; never carried in the journal or to the daemon). */
        bool no_sidecars;
        uint64_t judged_by; /* stamp of the policy and certificates the verdict was made under */
        /* In the daemon's image cache: the entry's id, unique while the daemon runs.  In its
         * worker: the id of the entry whose mount the image reuses (0: none), by which the
         * handover names the entries the daemon keeps (image_cache_from_handover()). */
        uint64_t cache_id;
        /* In a run in process: root_fd is a clone of a mount the last such run kept (layers.h);
         * once the new trees hold their own, the clone is let go early (layers_release_start())
         * and kept_dev, its superblock's device, tells which kept mount it was. */
        bool kept_clone;
        dev_t kept_dev;

        /* From its extension-release: the service manager's part (EXTENSION_RELOAD_MANAGER=,
         * EXTENSION_RESTART_UNITS=, EXTENSION_RELOAD_OR_RESTART_UNITS=). */
        bool reload_manager;
        bool reload_manager_invalid; /* EXTENSION_RELOAD_MANAGER= is no boolean: ignored, with a warning */
        char **restart_units;
        char **reload_or_restart_units;
        /* Of the units those name, what the image's own layer holds (units.h): "foo.service"
         * for a unit file, "foo.service.d/" for a drop-in directory, the template's for an
         * instance; recorded by the probe. */
        char **shipped_units;
        /* The links in its unit directories that enable a unit for another (units.h):
         * "multi-user.target.wants/foo.service", "T.requires/U"; recorded by the probe. */
        char **wanted_units;
} Image;

typedef enum ImagePolicy {
        IMAGE_POLICY_OPEN,   /* anything compatible; verity is checked where the image has it */
        IMAGE_POLICY_VERITY, /* only images with verity data (no directories) */
        IMAGE_POLICY_SIGNED, /* only images with a valid root hash signature */
        IMAGE_POLICY_DENY,   /* no image at all (systemd's "-") */
        _IMAGE_POLICY_MAX,
} ImagePolicy;

const char *image_policy_to_string(ImagePolicy p);
int image_policy_from_string(const char *s);
/* sysextd's names above, or a systemd image policy (systemd.image-policy(7)): "*", "-", "~",
 * or DESIGNATOR=FLAGS:...: what the root and usr partitions may be (a plain file system image
 * is a root partition) becomes the least that both allow: unprotected -> open, verity ->
 * verity, signed -> signed, absent or unused only -> deny. */
int image_policy_parse(const char *s);

typedef struct ProbeContext {
        int root_fd;                /* the root everything is resolved in */
        const Release *host;
        char *const *hierarchies;   /* every class's */
        const ImageClass *hierarchy_class; /* per hierarchy: an image extends only its class's */
        bool force;                 /* --force: the release file is not matched against the host */
        unsigned mount_attrs[_IMAGE_CLASS_MAX];
        ImagePolicy policy[_IMAGE_CLASS_MAX];
        const char *cert_dir;       /* trusted certificates, below cert_root_fd */
        int cert_root_fd;           /* the root below sysextd's trees (base.h) */
        const char *cert_display;   /* the same for messages */
        bool use_dm;                /* device-mapper is there: dm-verity, else user space */
} ProbeContext;

typedef struct ImageList {
        Image *images; /* ordered by name as versions, lowest first (= lowest layer) */
        size_t n;
} ImageList;

const char *image_verdict_to_string(ImageVerdict v);
int image_verdict_from_string(const char *s);

void image_done(Image *img);
void image_list_free(ImageList *l);
#define _cleanup_image_list_ _cleanup_(image_list_free)

/* Why a name cannot be an image's (NULL when it can): valid UTF-8, no control characters, no
 * leading dot, at most IMAGE_NAME_MAX bytes, as systemd-sysext requires. */
const char *image_name_invalid_reason(const char *name);

/* Lists images in the search directories below root_fd (relative paths such as
 * "etc/extensions", each resolved inside the root); the first directory that has a name
 * wins.  root_prefix is prepended to paths for display.  Entries that cannot be images
 * (a FIFO, a device or a socket named NAME.raw, an invalid name, a symlink that leads
 * nowhere inside the root, the picked entry of a version directory that is no image) are
 * listed as refused, with the reason.  No image is opened for reading; of a raw image's
 * sidecars, NAME.roothash is read (roothash). */
int image_discover(int root_fd, const char *root_prefix, char *const *search_dirs, ImageClass klass, ImageList *ret);
/* The same, and with all_versions every other entry of a version directory that is for this
 * machine and opens as an image of the right type too, with picked false (the one
 * image_discover() gives has picked true, as has every image that is no version directory's):
 * the candidates a rollback or a pin chooses from (generation.h).  Such extra entries are never
 * refused ones: an entry that cannot be an image is left out. */
int image_discover_ex(int root_fd, const char *root_prefix, char *const *search_dirs, ImageClass klass, bool all_versions,
                      ImageList *ret);

/* Version directories (systemd.v(7)): NAME.v holds directory images, NAME.raw.v and
 * NAME.sysext.raw.v image files, each named NAME_VERSION[_ARCH][+LEFT[-DONE]][SUFFIX].
 *
 * Of the names in such a directory (NULL-terminated), the one sysextd uses: of those for this
 * machine (for native_arch, its secondary architecture or none), one with tries left before one
 * without, then the newest version, the native architecture, the most tries left, the fewest
 * done.  Chosen by name alone, as systemd.v(7) does: what the entry is never changes the pick,
 * and an older version never stands in for a newest one that cannot be used (it is refused,
 * see below), as none does for one that turns out incompatible.  Names starting with a dot
 * and sidecars are not versions.  1 and the name, or 0 when none is for this machine. */
int image_version_pick(char *const *entries, const char *name, const char *suffix, const char *native_arch, char **ret);
/* The version of an entry of such a directory when it is one for this machine: 1 and the
 * version ("2.1" of "app_2.1_x86-64+3.raw"), 0 when it is no entry of this image for it. */
int image_version_of(const char *entry, const char *name, const char *suffix, const char *native_arch, char **ret);

/* Why the picked entry of version directory vdir cannot be an image, in the words the top level
 * uses ("cannot open app.raw.v/app_2.raw: it is a symbolic link to /tmp/x, which does not exist
 * under the root (links are resolved inside it)"), or NULL in *ret when it can.  target: what
 * the entry links to (NULL: it is no symbolic link); error: how opening it inside the root
 * failed, 0 when it opened and mode is what it resolves to (a symbolic link where openat2() is
 * not allowed and links are not followed); want_dir: vdir holds directory images (NAME.v), not
 * image files. */
int image_version_entry_problem(const char *vdir, const char *entry, const char *target, int error, mode_t mode,
                                bool want_dir, char **ret);

/* Appends the images of b to a (taking them); a stays ordered class by class. */
int image_list_append(ImageList *a, ImageList *b);

/* Opens the image, checks verity and the policy, attaches and mounts a raw one (detached),
 * verifies the device and matches the release file against the host; fills verdict/reason/hierarchies. Per-image
 * failures become IMAGE_REFUSED with a reason; only a failure to run at all is returned. */
int image_probe(Image *img, const ProbeContext *ctx);

/* image_probe() in two halves, so that the mounts of many plain erofs images can be made at
 * once (engine.c).  image_probe_begin() is image_probe() up to the mount: for a plain erofs
 * image (no verity data) with ret_file_fd given, it returns 1 and the open file instead of
 * mounting it.  image_probe_mounted_all() then mounts each images[i] from fds[i] and reads the
 * mounted image, on up to four threads (one per CPU of the process's affinity mask, at least
 * four images each), and closes each file once it is mounted (the caller closes what is left
 * in fds, -EBADF where closed); then, on the caller's thread, in order, what the kernel could
 * not mount from its file gets a loop device.  The threads touch only their images and files,
 * read ctx, and block every signal.  A failure to run at all (-ENOMEM) is returned with the
 * image's index in *ret_failed (n: none's); -EINTR when a stop was asked for
 * (engine_stop_requested()) before every image was done. */
int image_probe_begin(Image *img, const ProbeContext *ctx, int *ret_file_fd);
int image_probe_mounted_all(Image **images, int *fds, size_t n, const ProbeContext *ctx, size_t *ret_failed);

/* Releases what a probe holds (mount fd, loop device), keeping the verdict. */
void image_release(Image *img);

/* A hash over what a listing of the images depends on, read without opening any content:
 * the search directories' entries (a version directory's each, followed inside the root),
 * the trusted certificates and the host's release files.
 * Never 0. */
int image_discovery_fingerprint(int root_fd, char *const *search_dirs, const char *trusted_dir, uint64_t *ret);
