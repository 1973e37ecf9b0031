/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The decisions, without a kernel: stack_analyze(), plan_transition(), recover_decide(),
 * tree_matches_entry() and plan_image_same(), for every branch of their tables. */
#include <stdio.h>

#include "overlay.h"
#include "plan.h"
#include "recover.h"
#include "tests.h"
#include "tree.h"
#include "util.h"

#define MAX_STACK 8

typedef struct Fixture {
        HierarchyState h;
        MountEntry entries[MAX_STACK];
        StackRole roles[MAX_STACK];
        Tree *trees[MAX_STACK];
} Fixture;

static Tree tree_a = { .id = (char *) "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", .hierarchy = (char *) "usr", .generation = 5 };
static Tree tree_b = { .id = (char *) "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", .hierarchy = (char *) "usr", .generation = 3 };
static Tree tree_c = { .id = (char *) "cccccccccccccccccccccccccccccccc", .hierarchy = (char *) "usr", .generation = 7 };
static Tree tree_base = { .id = (char *) "dddddddddddddddddddddddddddddddd", .hierarchy = (char *) "usr", .generation = 8,
                          .base_only = true };

/* A stack from a spec, bottom first: 'F' foreign, 'U' unrecorded, 'a'/'b'/'c'/'d' ours. */
static void fixture(Fixture *f, const char *spec) {
        *f = (Fixture) {};
        f->h.name = (char *) "usr";
        f->h.path = (char *) "/R/usr";
        f->h.exists = true;
        f->h.stack.entries = f->entries;
        f->h.roles = f->roles;
        f->h.trees = f->trees;
        for (const char *c = spec; *c; c++) {
                size_t i = f->h.stack.n++;
                f->entries[i] = (MountEntry) { .id = 100 + i, .fstype = (char *) "overlay", .source = (char *) "sysextd" };
                switch (*c) {
                case 'F':
                        f->roles[i] = STACK_FOREIGN;
                        f->entries[i].fstype = (char *) "tmpfs";
                        break;
                case 'U':
                        f->roles[i] = STACK_UNRECORDED;
                        break;
                default:
                        f->roles[i] = STACK_OURS;
                        f->trees[i] = *c == 'a' ? &tree_a : *c == 'b' ? &tree_b : *c == 'c' ? &tree_c : &tree_base;
                }
        }
}

static StackView analyze(const char *spec, const char *current) {
        Fixture f;
        StackView v;

        fixture(&f, spec);
        stack_analyze(&f.h, current, &v);
        return v;
}

static void test_stack_analyze(void) {
        StackView v;

        v = analyze("", NULL);
        CHECK(!v.live && !v.covered && v.n_ours == 0 && v.n_repair == 0);
        v = analyze("F", NULL);
        CHECK(!v.live && !v.covered && v.n_ours == 0);
        v = analyze("a", tree_a.id);
        CHECK(v.live == &tree_a && v.n_repair == 0 && v.n_buried == 0 && v.run_start == 0);
        v = analyze("Fa", tree_a.id); /* a /usr partition below ours */
        CHECK(v.live == &tree_a && !v.covered && v.run_start == 1 && v.live_index == 1);
        v = analyze("aF", tree_a.id);
        CHECK(!v.live && v.covered && v.covered_tree == &tree_a && v.n_repair == 0);
        v = analyze("aU", tree_a.id); /* an unrecorded overlay on top: foreign */
        CHECK(!v.live && v.covered && v.n_unrecorded == 1);
        v = analyze("Ua", tree_a.id);
        CHECK(v.live == &tree_a && v.n_unrecorded == 1 && v.run_start == 1 && v.n_buried == 0);
        /* A run of ours: the journal's tree is the intended one. */
        v = analyze("ab", tree_a.id);
        CHECK(v.live == &tree_a && v.n_repair == 1 && v.n_buried == 0);
        v = analyze("ab", tree_b.id);
        CHECK(v.live == &tree_b && v.n_repair == 0 && v.n_buried == 1);
        /* Without a journal: the newest (a: 5 over b: 3; c: 7). */
        v = analyze("ba", NULL);
        CHECK(v.live == &tree_a && v.n_repair == 0 && v.n_buried == 1);
        v = analyze("ab", NULL);
        CHECK(v.live == &tree_a && v.n_repair == 1);
        v = analyze("cab", NULL);
        CHECK(v.live == &tree_c && v.n_repair == 2 && v.n_buried == 0);
        v = analyze("cab", "nonexistent");
        CHECK(v.live == &tree_c && v.n_repair == 2);
        /* Ours over a foreign mount over ours: the upper run goes. */
        v = analyze("aFb", tree_b.id);
        CHECK(!v.live && v.covered && v.covered_tree == &tree_a && v.n_repair == 1);
        v = analyze("aFbc", tree_c.id);
        CHECK(v.covered && v.n_repair == 2);
        v = analyze("FaFb", tree_b.id);
        CHECK(v.covered && v.covered_tree == &tree_a && v.n_repair == 1);
        CHECK(v.n_ours == 2);
}

static PlanHierarchy planned(Fixture *f, const char *spec, const char *current) {
        PlanHierarchy p = {};

        fixture(f, spec);
        p.state = &f->h;
        stack_analyze(&f->h, current, &p.view);
        return p;
}

static Image image(const char *name, ImageVerdict v, unsigned hierarchies) {
        return (Image) { .name = (char *) name, .path = (char *) name, .verdict = v, .hierarchies = hierarchies,
                         .root_fd = -EBADF };
}

typedef struct PlanCase {
        Plan plan;
        int r;
} PlanCase;

static PlanCase run_plan(EngineVerb verb, const char *spec, const char *current, Image *imgs, size_t n_imgs,
                         size_t n_children, bool beneath, bool degraded, bool strict, bool unchanged) {
        Fixture f;
        PlanHierarchy h = planned(&f, spec, current);
        ImageList l = { .images = imgs, .n = n_imgs };
        PlanCase c = {};

        f.h.children.n = n_children;
        c.r = plan_transition(&(PlanInput) { .verb = verb, .strict = strict, .mount_beneath = beneath,
                                             .allow_degraded = degraded, .hierarchies = &h, .n_hierarchies = 1,
                                             .images = &l, .unchanged = unchanged },
                              &c.plan);
        return c;
}

static HierarchyAction action(PlanCase *c) {
        return c->plan.error == ENGINE_OK && c->plan.n_hierarchies == 1 ? c->plan.hierarchies[0].action : _ACTION_MAX;
}

static void test_plan(void) {
        Image one[] = { image("x", IMAGE_COMPATIBLE, 1) };
        Image none[] = { image("x", IMAGE_COMPATIBLE, 2) }; /* content for another hierarchy */
        Image order[] = { image("a", IMAGE_COMPATIBLE, 1), image("b", IMAGE_INCOMPATIBLE, 1), image("c", IMAGE_COMPATIBLE, 1) };
        PlanCase c;

        /* merge */
        c = run_plan(ENGINE_MERGE, "", NULL, one, 1, 0, true, false, false, false);
        CHECK(c.r == 0 && action(&c) == ACTION_BUILD && !c.plan.hierarchies[0].replace && c.plan.any_work);
        plan_done(&c.plan);
        c = run_plan(ENGINE_MERGE, "a", tree_a.id, one, 1, 0, true, false, false, false);
        CHECK(c.r == 0 && c.plan.error == ENGINE_ERROR_ALREADY_MERGED);
        plan_done(&c.plan);
        c = run_plan(ENGINE_MERGE, "aF", tree_a.id, one, 1, 0, true, false, false, false);
        CHECK(c.plan.error == ENGINE_ERROR_ALREADY_MERGED && strstr(c.plan.message, "foreign"));
        plan_done(&c.plan);
        c = run_plan(ENGINE_MERGE, "d", tree_base.id, one, 1, 0, true, false, false, false); /* base only: merge builds */
        CHECK(action(&c) == ACTION_BUILD && c.plan.hierarchies[0].replace);
        plan_done(&c.plan);
        c = run_plan(ENGINE_MERGE, "F", NULL, one, 1, 0, false, false, false, false); /* on a partition, no beneath needed */
        CHECK(action(&c) == ACTION_BUILD && !c.plan.hierarchies[0].replace);
        plan_done(&c.plan);
        c = run_plan(ENGINE_MERGE, "", NULL, none, 1, 0, true, false, false, false);
        CHECK(action(&c) == ACTION_KEEP && !c.plan.any_work);
        plan_done(&c.plan);
        {
                Image bad[] = { image("x", IMAGE_INCOMPATIBLE, 0), image("y", IMAGE_REFUSED, 0) };
                c = run_plan(ENGINE_MERGE, "", NULL, bad, 2, 0, true, false, false, false);
                CHECK(c.plan.error == ENGINE_ERROR_IMAGE_REFUSED && strstr(c.plan.message, "1 refused, 1 incompatible"));
                plan_done(&c.plan);
                c = run_plan(ENGINE_MERGE, "", NULL, bad, 2, 0, true, false, true, false);
                CHECK(c.plan.error == ENGINE_ERROR_IMAGE_REFUSED && strstr(c.plan.message, "strict"));
                plan_done(&c.plan);
        }
        {
                Image alien[] = { image("x", IMAGE_INCOMPATIBLE, 1), image("y", IMAGE_INCOMPATIBLE, 0) };
                /* only incompatible images: nothing to do, no error (systemd-sysext exits 0); the
                 * plan counts them for the engine's message */
                c = run_plan(ENGINE_MERGE, "", NULL, alien, 2, 0, true, false, false, false);
                CHECK(c.r == 0 && c.plan.error == ENGINE_OK && c.plan.no_images && !c.plan.any_work);
                CHECK(c.plan.n_incompatible == 2);
                plan_done(&c.plan);
                /* no image at all: nothing to do, no error */
                c = run_plan(ENGINE_MERGE, "", NULL, NULL, 0, 0, true, false, false, false);
                CHECK(c.r == 0 && c.plan.error == ENGINE_OK && c.plan.no_images && !c.plan.any_work);
                plan_done(&c.plan);
                /* a refresh of a merged tree with only incompatible images left takes it down */
                c = run_plan(ENGINE_REFRESH, "a", tree_a.id, alien, 2, 0, true, false, false, false);
                CHECK(c.plan.error == ENGINE_OK && action(&c) == ACTION_DETACH && c.plan.n_incompatible == 2);
                plan_done(&c.plan);
                /* ... and with nothing merged has nothing to do, which is no error */
                c = run_plan(ENGINE_REFRESH, "", NULL, alien, 2, 0, true, false, false, false);
                CHECK(c.plan.error == ENGINE_OK && !c.plan.any_work);
                plan_done(&c.plan);
        }
        /* Layers: top first, the highest version on top; names bottom to top. */
        c = run_plan(ENGINE_MERGE, "", NULL, order, 3, 0, true, false, false, false);
        CHECK(action(&c) == ACTION_BUILD && c.plan.hierarchies[0].n_layers == 2);
        CHECK(c.plan.hierarchies[0].layers[0] == 2 && c.plan.hierarchies[0].layers[1] == 0);
        CHECK_STREQ(c.plan.hierarchies[0].names[0], "a");
        CHECK_STREQ(c.plan.hierarchies[0].names[1], "c");
        plan_done(&c.plan);

        /* refresh */
        c = run_plan(ENGINE_REFRESH, "a", tree_a.id, one, 1, 0, true, false, false, false);
        CHECK(action(&c) == ACTION_BUILD && c.plan.hierarchies[0].replace);
        plan_done(&c.plan);
        c = run_plan(ENGINE_REFRESH, "a", tree_a.id, one, 1, 0, true, false, false, true);
        CHECK(c.plan.error == ENGINE_OK && !c.plan.any_work);
        plan_done(&c.plan);
        c = run_plan(ENGINE_REFRESH, "aF", tree_a.id, one, 1, 0, true, false, false, false);
        CHECK(c.plan.error == ENGINE_ERROR_FOREIGN_MOUNT);
        plan_done(&c.plan);
        c = run_plan(ENGINE_REFRESH, "a", tree_a.id, none, 1, 0, true, false, false, false); /* every image gone */
        CHECK(action(&c) == ACTION_DETACH);
        plan_done(&c.plan);
        c = run_plan(ENGINE_REFRESH, "a", tree_a.id, none, 1, 2, true, false, false, false);
        CHECK(action(&c) == ACTION_BASE);
        plan_done(&c.plan);
        c = run_plan(ENGINE_REFRESH, "", NULL, one, 1, 0, true, false, false, false); /* refresh merges */
        CHECK(action(&c) == ACTION_BUILD);
        plan_done(&c.plan);
        /* No MOVE_MOUNT_BENEATH. */
        c = run_plan(ENGINE_REFRESH, "a", tree_a.id, one, 1, 0, false, false, false, false);
        CHECK(c.plan.error == ENGINE_ERROR_KERNEL_REFUSED && strstr(c.plan.message, "DegradedMode"));
        plan_done(&c.plan);
        c = run_plan(ENGINE_REFRESH, "a", tree_a.id, one, 1, 0, false, true, false, false);
        CHECK(action(&c) == ACTION_BUILD);
        plan_done(&c.plan);
        /* A refused image of a live extension: broken keeps the tree, policy takes it out. */
        tree_a.extensions = (char *[]) { (char *) "x", NULL };
        {
                Image broken[] = { image("x", IMAGE_REFUSED, 0) };
                c = run_plan(ENGINE_REFRESH, "a", tree_a.id, broken, 1, 0, true, false, false, false);
                CHECK(c.plan.error == ENGINE_ERROR_IMAGE_REFUSED && strstr(c.plan.message, "current tree stays"));
                plan_done(&c.plan);
                broken[0].refused_by_policy = true;
                c = run_plan(ENGINE_REFRESH, "a", tree_a.id, broken, 1, 0, true, false, false, false);
                CHECK(action(&c) == ACTION_DETACH && strv_length(c.plan.dropped) == 1);
                CHECK(c.plan.dropped && strstr(c.plan.dropped[0], "no longer passes"));
                plan_done(&c.plan);
        }
        tree_a.extensions = NULL;

        /* unmerge */
        c = run_plan(ENGINE_UNMERGE, "a", tree_a.id, NULL, 0, 0, true, false, false, false);
        CHECK(action(&c) == ACTION_DETACH && !c.plan.hierarchies[0].replace);
        plan_done(&c.plan);
        c = run_plan(ENGINE_UNMERGE, "a", tree_a.id, NULL, 0, 1, true, false, false, false);
        CHECK(action(&c) == ACTION_BASE && c.plan.hierarchies[0].replace);
        plan_done(&c.plan);
        c = run_plan(ENGINE_UNMERGE, "ba", tree_a.id, NULL, 0, 0, true, false, false, false); /* b buried: never shown */
        CHECK(action(&c) == ACTION_BASE);
        plan_done(&c.plan);
        c = run_plan(ENGINE_UNMERGE, "d", tree_base.id, NULL, 0, 1, true, false, false, false);
        CHECK(action(&c) == ACTION_KEEP && !c.plan.any_work);
        plan_done(&c.plan);
        c = run_plan(ENGINE_UNMERGE, "d", tree_base.id, NULL, 0, 0, true, false, false, false);
        CHECK(action(&c) == ACTION_DETACH);
        plan_done(&c.plan);
        c = run_plan(ENGINE_UNMERGE, "F", NULL, NULL, 0, 0, true, false, false, false);
        CHECK(action(&c) == ACTION_KEEP);
        plan_done(&c.plan);
        c = run_plan(ENGINE_UNMERGE, "aF", tree_a.id, NULL, 0, 0, true, false, false, false);
        CHECK(c.plan.error == ENGINE_ERROR_FOREIGN_MOUNT);
        plan_done(&c.plan);

        /* A hierarchy that does not exist is left alone. */
        {
                Fixture f;
                PlanHierarchy h = planned(&f, "", NULL);
                ImageList l = { .images = one, .n = 1 };
                Plan p = {};

                /* A hierarchy that does not exist: created for an image with content for it. */
                f.h.exists = false;
                CHECK(plan_transition(&(PlanInput) { .verb = ENGINE_MERGE, .mount_beneath = true, .hierarchies = &h,
                                                     .n_hierarchies = 1, .images = &l },
                                      &p) == 0);
                CHECK(p.error == ENGINE_OK && p.hierarchies[0].action == ACTION_BUILD && p.hierarchies[0].create && p.any_work);
                plan_done(&p);
        }
        /* Too many layers for overlayfs. */
        {
                Image *many = calloc(OVERLAY_LAYERS_MAX, sizeof(Image));
                for (size_t i = 0; i < OVERLAY_LAYERS_MAX; i++)
                        many[i] = image("m", IMAGE_COMPATIBLE, 1);
                c = run_plan(ENGINE_MERGE, "", NULL, many, OVERLAY_LAYERS_MAX, 0, true, false, false, false);
                CHECK(c.plan.error == ENGINE_ERROR_IMAGE_REFUSED && c.plan.errno_value == E2BIG);
                plan_done(&c.plan);
                free(many);
        }
}

static RecoverDecision decide(const char *spec, const Tree *old, const Tree *new) {
        Fixture f;

        fixture(&f, spec);
        return recover_decide(&f.h, old ? old->id : NULL, new ? new->id : NULL);
}

static void test_recover(void) {
        /* old a, new b */
        CHECK(decide("b", &tree_a, &tree_b) == RECOVER_DONE);
        CHECK(decide("Fb", &tree_a, &tree_b) == RECOVER_DONE);
        CHECK(decide("ba", &tree_a, &tree_b) == RECOVER_FINISH);
        CHECK(decide("a", &tree_a, &tree_b) == RECOVER_DISCARD);
        CHECK(decide("bca", &tree_a, &tree_b) == RECOVER_DISCARD); /* b not right below a */
        CHECK(decide("baF", &tree_a, &tree_b) == RECOVER_COVERED);
        CHECK(decide("aF", &tree_a, &tree_b) == RECOVER_COVERED);
        CHECK(decide("bU", &tree_a, &tree_b) == RECOVER_COVERED);
        CHECK(decide("", &tree_a, &tree_b) == RECOVER_GONE);
        CHECK(decide("F", &tree_a, &tree_b) == RECOVER_GONE);
        CHECK(decide("c", &tree_a, &tree_b) == RECOVER_GONE);
        CHECK(decide("bc", &tree_a, &tree_b) == RECOVER_DISCARD); /* something else of ours on top */
        /* first merge: no old tree */
        CHECK(decide("b", NULL, &tree_b) == RECOVER_DONE);
        CHECK(decide("Fb", NULL, &tree_b) == RECOVER_DONE);
        CHECK(decide("", NULL, &tree_b) == RECOVER_DISCARD);
        CHECK(decide("F", NULL, &tree_b) == RECOVER_DISCARD);
        CHECK(decide("bF", NULL, &tree_b) == RECOVER_COVERED);
        /* unmerge: no new tree */
        CHECK(decide("", &tree_a, NULL) == RECOVER_DONE);
        CHECK(decide("F", &tree_a, NULL) == RECOVER_DONE);
        CHECK(decide("a", &tree_a, NULL) == RECOVER_DISCARD);
        CHECK(decide("aF", &tree_a, NULL) == RECOVER_COVERED);
        CHECK(recover_decision_to_string(RECOVER_FINISH) && streq(recover_decision_to_string(RECOVER_FINISH), "finish"));
}

static void test_identity(void) {
        Tree t = { .id = (char *) "x", .mount_id = 42, .dev = 0x2a, .unique_id = 1000 };
        MountEntry ours = { .id = 42, .dev = 0x2a, .fstype = (char *) "overlay", .source = (char *) "sysextd" };
        MountEntry e;

        CHECK(tree_matches_entry(&t, &ours, 1000));
        CHECK(tree_matches_entry(&t, &ours, 0)); /* covered: no unique id read */
        CHECK(!tree_matches_entry(&t, &ours, 1001)); /* the same 32-bit id, reused */
        e = ours, e.id = 43;
        CHECK(!tree_matches_entry(&t, &e, 0)); /* a bind of our overlay: same device, another mount */
        e = ours, e.dev = 0x2b;
        CHECK(!tree_matches_entry(&t, &e, 0));
        e = ours, e.source = (char *) "other-tool";
        CHECK(!tree_matches_entry(&t, &e, 0));
        e = ours, e.fstype = (char *) "tmpfs";
        CHECK(!tree_matches_entry(&t, &e, 0));
        t.unique_id = 0; /* recorded on a kernel without unique ids */
        CHECK(tree_matches_entry(&t, &ours, 1001));
}

static void test_unchanged(void) {
        Image a = image("a", IMAGE_COMPATIBLE, 1), b = image("b", IMAGE_COMPATIBLE, 1), a2 = a;
        ImageList now = { .images = (Image[]) { a, b }, .n = 2 }, rec = { .images = (Image[]) { b, a }, .n = 2 };

        CHECK(plan_images_unchanged(&now, &rec, IMAGE_CLASS_ALL));
        a2.st.st_ino = 99;
        rec.images[1] = a2;
        CHECK(!plan_images_unchanged(&now, &rec, IMAGE_CLASS_ALL));
        rec.images[1] = a;
        rec.images[1].stamp = 7; /* a directory image edited inside */
        CHECK(!plan_images_unchanged(&now, &rec, IMAGE_CLASS_ALL));
        rec.n = 1;
        CHECK(!plan_images_unchanged(&now, &rec, IMAGE_CLASS_ALL));
        now.n = 0, rec.n = 0;
        CHECK(plan_images_unchanged(&now, &rec, IMAGE_CLASS_ALL));
}

#define RH1 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define RH2 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

/* A merged verity image as the journal has it, and what discovery finds of the same file. */
static Image verity_image(const char *roothash, ino_t ino) {
        Image img = image("v", IMAGE_COMPATIBLE, 1);

        img.kind = IMAGE_EROFS;
        img.verity = VERITY_DM;
        img.roothash = (char *) roothash;
        img.st.st_dev = 2049;
        img.st.st_ino = ino;
        img.st.st_size = 1 << 20;
        img.st.st_mtim.tv_sec = 1000 + ino;
        img.stamp = 500 + ino; /* over its sidecars: new ones for a copy */
        return img;
}

static void test_verity_identity(void) {
        Image rec = verity_image(RH1, 10), now;

        /* The same root hash: a copy to a new inode (new mtime, new sidecars) is the same image. */
        now = verity_image(RH1, 11);
        CHECK(plan_image_same(&rec, &now));
        now = verity_image(RH1, 10);
        CHECK(plan_image_same(&rec, &now));
        /* The very same file with the same hash, but a sidecar changed in place (a hash tree
         * tampered with: its stamp): verified again. */
        now = verity_image(RH1, 10);
        now.stamp++;
        CHECK(!plan_image_same(&rec, &now));
        now = verity_image(RH1, 10);
        now.st.st_mtim.tv_sec++;
        CHECK(!plan_image_same(&rec, &now));

        /* Another root hash at the same path: another image, copied or not. */
        now = verity_image(RH2, 11);
        CHECK(!plan_image_same(&rec, &now));
        /* ... even when the file is the very same (only NAME.roothash was replaced; its stamp
         * kept here to show that the hash alone decides). */
        now = verity_image(RH2, 10);
        CHECK(!plan_image_same(&rec, &now));

        /* One side without a root hash: the file's identity decides. */
        now = verity_image(NULL, 10);
        CHECK(plan_image_same(&rec, &now));
        now = verity_image(NULL, 11);
        CHECK(!plan_image_same(&rec, &now));
        {
                Image old = verity_image(NULL, 10); /* recorded before root hashes were */

                now = verity_image(RH1, 10);
                CHECK(plan_image_same(&old, &now));
                now = verity_image(RH1, 11);
                CHECK(!plan_image_same(&old, &now));
        }
        /* The file's identity includes the stamp over its sidecars and the mtime. */
        now = verity_image(NULL, 10);
        now.stamp = 1;
        CHECK(!plan_image_same(&rec, &now));
        now = verity_image(NULL, 10);
        now.st.st_mtim.tv_nsec = 1;
        CHECK(!plan_image_same(&rec, &now));

        /* A disk image's root hash comes from its partitions, which discovery does not read: the
         * file decides, whatever NAME.roothash says. */
        {
                Image ddi = verity_image(RH1, 10);

                ddi.kind = IMAGE_DDI;
                now = verity_image(RH1, 11);
                CHECK(!plan_image_same(&ddi, &now));
                now = verity_image(RH2, 10);
                CHECK(plan_image_same(&ddi, &now));
        }
        /* A root hash counts only for an image that was merged (verified). */
        {
                Image bad = verity_image(RH1, 10);

                bad.verdict = IMAGE_REFUSED;
                now = verity_image(RH1, 11);
                CHECK(!plan_image_same(&bad, &now));
                bad.verdict = IMAGE_INCOMPATIBLE;
                CHECK(!plan_image_same(&bad, &now));
        }
        /* What the verdict depends on besides the hash: the size, a signature beside it. */
        now = verity_image(RH1, 11);
        now.st.st_size += 4096;
        CHECK(!plan_image_same(&rec, &now));
        now = verity_image(RH1, 11);
        now.signature_sidecar = true; /* a signature appeared */
        CHECK(!plan_image_same(&rec, &now));
        {
                Image sig = verity_image(RH1, 10);

                sig.signed_valid = true;
                now = verity_image(RH1, 11);
                now.signature_sidecar = true; /* signed, copied with its signature */
                CHECK(plan_image_same(&sig, &now));
                now.signature_sidecar = false; /* its signature went */
                CHECK(!plan_image_same(&sig, &now));
        }

        /* Never another extension, class or path. */
        now = verity_image(RH1, 11);
        now.name = (char *) "w";
        CHECK(!plan_image_same(&rec, &now));
        now = verity_image(RH1, 11);
        now.klass = IMAGE_CLASS_CONFEXT;
        CHECK(!plan_image_same(&rec, &now));
        now = verity_image(RH1, 11);
        now.path = (char *) "/etc/extensions/v.raw";
        CHECK(!plan_image_same(&rec, &now));

        /* The refresh's question, over lists: a copy among unchanged images is no change. */
        {
                Image a = image("a", IMAGE_COMPATIBLE, 1);
                ImageList l = { .images = (Image[]) { a, verity_image(RH1, 11) }, .n = 2 },
                          r = { .images = (Image[]) { verity_image(RH1, 10), a }, .n = 2 };

                CHECK(plan_images_unchanged(&l, &r, IMAGE_CLASS_ALL));
                l.images[1] = verity_image(RH2, 11);
                CHECK(!plan_images_unchanged(&l, &r, IMAGE_CLASS_ALL));
        }
}

int main(void) {
        test_stack_analyze();
        test_plan();
        test_recover();
        test_identity();
        test_unchanged();
        test_verity_identity();
        return tap_finish();
}
