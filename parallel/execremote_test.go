package parallel_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/parallel"
)

// newRemote makes a bare repository holding main with one commit, and n
// clones of it (each with "origin"), and returns the bare repository and
// the clones' working trees.
func newRemote(t *testing.T, n int) (string, []string) {
	t.Helper()
	seed := newRepo(t)
	bare := filepath.Join(t.TempDir(), "shared repo.git")
	gitT(t, t.TempDir(), "clone", "--quiet", "--bare", seed, bare)
	var clones []string
	for i := range n {
		dir := filepath.Join(t.TempDir(), "machine "+string(rune('a'+i)))
		gitT(t, t.TempDir(), "clone", "--quiet", bare, dir)
		clones = append(clones, dir)
	}
	return bare, clones
}

func TestCheckRemote(t *testing.T) {
	t.Parallel()
	_, clones := newRemote(t, 1)
	g := &parallel.ExecGit{Root: clones[0]}
	if err := g.CheckRemote(t.Context(), "origin"); err != nil {
		t.Fatalf("CheckRemote(origin) = %v", err)
	}
	err := g.CheckRemote(t.Context(), "upstream")
	if !errors.Is(err, parallel.ErrNoRemote) || !strings.Contains(err.Error(), `"upstream"`) || !strings.Contains(err.Error(), "it has origin") {
		t.Errorf("CheckRemote(upstream) = %v; want ErrNoRemote naming it and the remotes there are", err)
	}
	if err := g.CheckRemote(t.Context(), "--all"); err == nil || errors.Is(err, parallel.ErrNoRemote) {
		t.Errorf("CheckRemote(--all) = %v; want refused as not a name", err)
	}
	if err := (&parallel.ExecGit{Root: newRepo(t)}).CheckRemote(t.Context(), "origin"); !errors.Is(err, parallel.ErrNoRemote) || !strings.Contains(err.Error(), "it has none") {
		t.Errorf("CheckRemote in a repository without remotes = %v", err)
	}
}

func TestFetch(t *testing.T) {
	t.Parallel()
	_, clones := newRemote(t, 2)
	a, b := clones[0], clones[1]
	ctx := t.Context()
	const ref = "refs/heads/ralph/integration"
	c := commitFiles(t, b, "b's work", map[string]string{"b.txt": "b\n"})
	gitT(t, b, "push", "--quiet", "origin", "HEAD:"+ref, "HEAD:refs/heads/other")
	// A configured refspec that would map every branch over the local
	// ones: Fetch must not follow it.
	gitT(t, a, "config", "--add", "remote.origin.fetch", "+refs/heads/*:refs/heads/mirror/*")

	g := &parallel.ExecGit{Root: a}
	got, ok, err := g.Fetch(ctx, "origin", ref)
	if err != nil || !ok || got != c {
		t.Fatalf("Fetch = %q, %v, %v; want %s", got, ok, err, c)
	}
	if at := gitT(t, a, "rev-parse", "refs/remotes/origin/ralph/integration"); at != c {
		t.Errorf("the remote-tracking ref is at %s; want %s", at, c)
	}
	if refs := gitT(t, a, "for-each-ref", "--format=%(refname)", "refs/heads/mirror", "refs/remotes/origin/other", "refs/tags"); refs != "" {
		t.Errorf("Fetch touched other refs: %q", refs)
	}
	if _, ok, err := g.Fetch(ctx, "origin", "refs/heads/nothere"); ok || err != nil {
		t.Errorf("Fetch of a branch the remote has not = %v, %v; want not ok, no error", ok, err)
	}
	if _, _, err := g.Fetch(ctx, "origin", "refs/tags/v1"); err == nil {
		t.Error("Fetch of a tag succeeded; want refused (branches only)")
	}
	gitT(t, a, "remote", "add", "gone", filepath.Join(t.TempDir(), "no such repo"))
	if _, ok, err := g.Fetch(ctx, "gone", ref); err == nil || ok {
		t.Errorf("Fetch from an unreachable remote = %v, %v; want an error", ok, err)
	}
}

func TestRemoteRefs(t *testing.T) {
	t.Parallel()
	_, clones := newRemote(t, 1)
	a := clones[0]
	head := gitT(t, a, "rev-parse", "HEAD")
	gitT(t, a, "push", "--quiet", "origin", "HEAD:refs/heads/ralph/attempt/x/1", "HEAD:refs/heads/ralph/attempt/x/2",
		"HEAD:refs/heads/ralph/attempt/xy/1", "HEAD:refs/heads/ralph/attempt/x%2F/1")
	got, err := (&parallel.ExecGit{Root: a}).RemoteRefs(t.Context(), "origin", "refs/heads/ralph/attempt/x/")
	want := map[string]string{"refs/heads/ralph/attempt/x/1": head, "refs/heads/ralph/attempt/x/2": head}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("RemoteRefs = %v, %v; want %v", got, err, want)
	}
	if got, err := (&parallel.ExecGit{Root: a}).RemoteRefs(t.Context(), "origin", "refs/heads/ralph/attempt/none/"); err != nil || len(got) != 0 {
		t.Errorf("RemoteRefs of a prefix with nothing = %v, %v", got, err)
	}
}

func TestPush(t *testing.T) {
	t.Parallel()
	bare, clones := newRemote(t, 2)
	a, b := clones[0], clones[1]
	ctx := t.Context()
	g := &parallel.ExecGit{Root: a}
	c1 := gitT(t, a, "rev-parse", "HEAD")
	c2 := commitFiles(t, a, "2", map[string]string{"b.txt": "b\n"})
	c3 := commitFiles(t, a, "3", map[string]string{"c.txt": "c\n"})
	side := commitFiles(t, b, "b's side", map[string]string{"side.txt": "s\n"})
	gitT(t, b, "push", "--quiet", "origin", "HEAD:refs/heads/theirs")
	remoteAt := func(ref string) string {
		out, err := os.ReadFile(filepath.Join(bare, ref))
		if err != nil {
			return gitT(t, bare, "for-each-ref", "--format=%(objectname)", ref)
		}
		return strings.TrimSpace(string(out))
	}

	for _, tc := range []struct {
		name      string
		at        string // where the remote's ref is first ("" none)
		mode      parallel.PushMode
		commit    string
		old       string
		want      error // nil, ErrRefMoved, ErrRefExists or errOther
		wantAfter string
	}{
		{"fast-forward makes a branch", "", parallel.PushFastForward, c2, "", nil, c2},
		{"fast-forward moves on", c1, parallel.PushFastForward, c3, c1, nil, c3},
		{"fast-forward already there", c2, parallel.PushFastForward, c2, c2, nil, c2},
		{"fast-forward outrun", c3, parallel.PushFastForward, c2, c1, parallel.ErrRefMoved, c3},
		{"fast-forward over unknown work", side, parallel.PushFastForward, c2, c1, parallel.ErrRefMoved, side},
		{"create", "", parallel.PushCreate, c2, "", nil, c2},
		{"create exists", c1, parallel.PushCreate, c2, "", parallel.ErrRefExists, c1},
		{"create exists with the commit", c2, parallel.PushCreate, c2, "", nil, c2},
		{"fast-forward backwards", c3, parallel.PushFastForward, c1, c3, parallel.ErrRefMoved, c3},
		{"unknown mode", c1, "sideways", c2, "", errOther, c1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := "refs/heads/push/" + strings.ReplaceAll(tc.name, " ", "-")
			if tc.at != "" {
				gitT(t, bare, "update-ref", ref, tc.at)
			}
			err := g.Push(ctx, parallel.PushParams{Remote: "origin", Ref: ref, Commit: tc.commit, Mode: tc.mode, Old: tc.old})
			switch tc.want {
			case nil:
				if err != nil {
					t.Fatalf("Push = %v", err)
				}
			case errOther:
				if err == nil || errors.Is(err, parallel.ErrRefMoved) || errors.Is(err, parallel.ErrRefExists) {
					t.Fatalf("Push = %v; want an error that is no race", err)
				}
			default:
				if !errors.Is(err, tc.want) {
					t.Fatalf("Push = %v; want %v", err, tc.want)
				}
			}
			if got := remoteAt(ref); got != tc.wantAfter {
				t.Errorf("the remote's %s is at %q; want %q", ref, got, tc.wantAfter)
			}
		})
	}

	t.Run("hook refuses", func(t *testing.T) {
		hooks := t.TempDir()
		os.WriteFile(filepath.Join(hooks, "pre-receive"), []byte("#!/bin/sh\necho 'no pushes today' >&2\nexit 1\n"), 0o755)
		repo := filepath.Join(t.TempDir(), "refusing.git")
		gitT(t, t.TempDir(), "clone", "--quiet", "--bare", bare, repo)
		gitT(t, repo, "config", "core.hooksPath", hooks)
		gitT(t, a, "remote", "add", "refusing", repo)
		err := g.Push(ctx, parallel.PushParams{Remote: "refusing", Ref: "refs/heads/main", Commit: c2, Old: c1})
		if err == nil || errors.Is(err, parallel.ErrRefMoved) || !strings.Contains(err.Error(), "no pushes today") {
			t.Errorf("Push to a remote whose hook refuses = %v; want a git error with the hook's words", err)
		}
	})

	// The remote's ref moves after the push looked at it and before it
	// updates it (here its own pre-receive hook moves it): the remote
	// says "failed to update ref", which is a lost race.
	t.Run("moved while the push was under way", func(t *testing.T) {
		hooks := t.TempDir()
		hook := "#!/bin/sh\nunset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES\ngit update-ref refs/heads/main refs/heads/theirs\n"
		os.WriteFile(filepath.Join(hooks, "pre-receive"), []byte(hook), 0o755)
		repo := filepath.Join(t.TempDir(), "busy.git")
		gitT(t, t.TempDir(), "clone", "--quiet", "--bare", bare, repo)
		gitT(t, repo, "config", "core.hooksPath", hooks)
		gitT(t, a, "remote", "add", "busy", repo)
		err := g.Push(ctx, parallel.PushParams{Remote: "busy", Ref: "refs/heads/main", Commit: c2, Old: c1})
		if !errors.Is(err, parallel.ErrRefMoved) {
			t.Errorf("Push whose ref moved under it = %v; want ErrRefMoved", err)
		}
	})

	// Two machines make the branch at once, at the same commit (both from
	// HEAD): the one the remote refuses has what it wanted.
	t.Run("made meanwhile at the same commit", func(t *testing.T) {
		hooks := t.TempDir()
		hook := "#!/bin/sh\nunset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES\nwhile read old new ref; do git update-ref \"$ref\" \"$new\"; done\n"
		os.WriteFile(filepath.Join(hooks, "pre-receive"), []byte(hook), 0o755)
		repo := filepath.Join(t.TempDir(), "twin.git")
		gitT(t, t.TempDir(), "clone", "--quiet", "--bare", bare, repo)
		gitT(t, repo, "config", "core.hooksPath", hooks)
		gitT(t, a, "remote", "add", "twin", repo)
		for _, mode := range []parallel.PushMode{parallel.PushCreate, parallel.PushFastForward} {
			ref := "refs/heads/twin-" + string(mode)
			if err := g.Push(ctx, parallel.PushParams{Remote: "twin", Ref: ref, Commit: c1, Mode: mode}); err != nil {
				t.Errorf("%s push of a ref made meanwhile at the same commit = %v; want success", mode, err)
			}
			if got := gitT(t, repo, "rev-parse", ref); got != c1 {
				t.Errorf("%s is at %s; want %s", ref, got, c1)
			}
		}
	})
}

// TestPushConcurrent races fast-forward pushes from several clones, each
// from the same tip: exactly one lands.
func TestPushConcurrent(t *testing.T) {
	t.Parallel()
	bare, clones := newRemote(t, 3)
	base := gitT(t, bare, "rev-parse", "refs/heads/main")
	const ref = "refs/heads/ralph/integration"
	gitT(t, bare, "update-ref", ref, base)
	var wg sync.WaitGroup
	errs := make([]error, len(clones))
	commits := make([]string, len(clones))
	for i, dir := range clones {
		commits[i] = commitFiles(t, dir, "work of "+dir, map[string]string{"w.txt": dir})
		wg.Go(func() {
			errs[i] = (&parallel.ExecGit{Root: dir}).Push(t.Context(), parallel.PushParams{Remote: "origin", Ref: ref, Commit: commits[i], Old: base})
		})
	}
	wg.Wait()
	won := 0
	at := gitT(t, bare, "rev-parse", ref)
	for i, err := range errs {
		switch {
		case err == nil:
			won++
			if at != commits[i] {
				t.Errorf("clone %d's push succeeded but the remote is at %s", i, at)
			}
		case !errors.Is(err, parallel.ErrRefMoved):
			t.Errorf("clone %d: %v; want ErrRefMoved for a lost race", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d pushes landed; want exactly 1 (%v)", won, errs)
	}
}
