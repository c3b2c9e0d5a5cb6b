// Package pgtest gives tests a PostgreSQL server: the throwaway cluster
// scripts/pgtest.sh starts, found through $RALPH_TEST_PG (a URL whose user
// may create databases). Without it a test is skipped with a message that
// says how to start one, and fails under CI=true, where .ci/run starts it.
// A test that restarts its server gets one of its own (Own): the shared
// one serves the test packages go test runs at once.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Env names the variable that holds the server's URL.
const Env = "RALPH_TEST_PG"

// AdminURL returns the server's URL, skipping (failing under CI=true) the
// test without one.
func AdminURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(Env)
	if u == "" {
		missing(t, "no PostgreSQL server for this test: $"+Env+" is unset; start one with: eval \"$(scripts/pgtest.sh start)\"")
	}
	return u
}

// missing skips the test for want of what msg names, or fails it under
// CI=true, where .ci/run provides everything.
func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: .ci/run must start it)")
	}
	t.Skip(msg)
}

var seq atomic.Int64

// URL makes an empty database for the test on the server, dropped when
// the test ends, and returns its URL.
func URL(t testing.TB) string {
	t.Helper()
	admin := AdminURL(t)
	name := fmt.Sprintf("ralph_test_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6, seq.Add(1))
	exec1(t, admin, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
		}
	})
	return WithDatabase(t, admin, name)
}

// PoolerEnv names the variable that holds the URL of PgBouncer in front
// of the server, in transaction pooling (scripts/pgtest.sh starts it
// where pgbouncer is installed), as managed PostgreSQL is often reached.
const PoolerEnv = "RALPH_TEST_PGBOUNCER"

// LaxPoolerEnv names a second PgBouncer of scripts/pgtest.sh, which drops
// the startup parameters it does not know where the first refuses them.
const LaxPoolerEnv = "RALPH_TEST_PGBOUNCER_LAX"

// Pooled is URL reached through the pooler of $RALPH_TEST_PGBOUNCER: an
// empty database made on the server for the test, dropped when the test
// ends; direct is the same database without the pooler, for the test's
// own looks at it. Without a pooler the test is skipped (failed under
// CI=true).
func Pooled(t testing.TB) (pooled, direct string) {
	t.Helper()
	return pooledBy(t, PoolerEnv)
}

// PooledLax is Pooled through the pooler of $RALPH_TEST_PGBOUNCER_LAX.
func PooledLax(t testing.TB) (pooled, direct string) {
	t.Helper()
	return pooledBy(t, LaxPoolerEnv)
}

func pooledBy(t testing.TB, env string) (pooled, direct string) {
	t.Helper()
	pooler := os.Getenv(env)
	if pooler == "" {
		missing(t, "no PgBouncer for this test: $"+env+" is unset; scripts/pgtest.sh start starts one where pgbouncer is installed (apt-get install pgbouncer)")
	}
	direct = URL(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	return WithDatabase(t, pooler, strings.TrimPrefix(u.Path, "/")), direct
}

// WithDatabase returns raw with its database name replaced.
func WithDatabase(t testing.TB, raw, db string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("pgtest: $%s: %v", Env, err)
	}
	u.Path = "/" + db
	return u.String()
}

// WithUser returns raw with its user (and password) replaced.
func WithUser(t testing.TB, raw string, user *url.Userinfo) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("pgtest: $%s: %v", Env, err)
	}
	u.User = user
	return u.String()
}

// Exec runs statements on the server at rawURL.
func Exec(t testing.TB, rawURL string, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		exec1(t, rawURL, s)
	}
}

func exec1(t testing.TB, rawURL, stmt string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, stmt); err != nil {
		t.Fatalf("pgtest: %s: %v", stmt, err)
	}
}

// Restart restarts the server of $RALPH_TEST_PG ("fast": sessions are
// ended; "immediate": as after a crash). It needs the cluster of
// scripts/pgtest.sh ($RALPH_TEST_PG_DIR); without it the test is skipped
// (failed under CI=true). That server is shared: by the test packages go
// test runs at once, and by other people's tests, whose connections a
// restart ends and whose new ones it refuses meanwhile. A test that
// restarts the server should have one of its own (Own).
func Restart(t testing.TB, mode string) {
	t.Helper()
	dir := os.Getenv("RALPH_TEST_PG_DIR")
	if dir == "" {
		missing(t, "restarting the server needs the cluster of scripts/pgtest.sh ($RALPH_TEST_PG_DIR)")
	}
	restart(t, dir, mode)
}

func restart(t testing.TB, dir, mode string) {
	t.Helper()
	cmd := exec.Command("bash", script(t), "restart", mode)
	cmd.Env = append(os.Environ(), "RALPH_TEST_PG_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: restart: %v\n%s", err, out)
	}
}

// Server is a PostgreSQL cluster of one test's own (Own).
type Server struct {
	admin, dir string
}

// Own starts a cluster for the test alone, as scripts/pgtest.sh starts
// the shared one, and stops it (removing its files) when the test ends:
// a test that restarts its server breaks nobody else's. It is skipped
// (failed under CI=true) where the shared server is missing, and needs
// PostgreSQL's binaries as scripts/pgtest.sh does. Starting one takes
// about a second.
func Own(t testing.TB) *Server {
	t.Helper()
	AdminURL(t)
	out, err := exec.Command("bash", script(t), "start").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("pgtest: start a server of the test's own: %v\n%s", err, stderr)
	}
	srv := &Server{}
	for line := range strings.Lines(string(out)) {
		k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, "'")
		switch k {
		case Env:
			srv.admin = v
		case "RALPH_TEST_PG_DIR":
			srv.dir = v
		}
	}
	if srv.admin == "" || srv.dir == "" {
		t.Fatalf("pgtest: scripts/pgtest.sh start printed no server:\n%s", out)
	}
	t.Cleanup(func() {
		cmd := exec.Command("bash", script(t), "stop")
		cmd.Env = append(os.Environ(), "RALPH_TEST_PG_DIR="+srv.dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("pgtest: stop %s: %v\n%s", srv.dir, err, out)
		}
	})
	return srv
}

// URL makes an empty database on the server and returns its URL; the
// server goes with the test.
func (s *Server) URL(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("ralph_test_%d", seq.Add(1))
	exec1(t, s.admin, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
	return WithDatabase(t, s.admin, name)
}

// Restart restarts the server ("fast": sessions are ended; "immediate":
// as after a crash) and returns once it takes connections again.
func (s *Server) Restart(t testing.TB, mode string) {
	t.Helper()
	restart(t, s.dir, mode)
}

// script is the path of scripts/pgtest.sh.
func script(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("pgtest: cannot find scripts/pgtest.sh")
	}
	return filepath.Join(strings.TrimSuffix(filepath.Dir(file), filepath.FromSlash("dag/postgres/pgtest")), "scripts", "pgtest.sh")
}
