// Package pgtest gives tests a PostgreSQL server: the throwaway cluster
// scripts/pgtest.sh starts, found through $RALPH_TEST_PG (a URL whose user
// may create databases). Without it a test is skipped with a message that
// says how to start one, and fails under CI=true, where .ci/run starts it.
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
		msg := "no PostgreSQL server for this test: $" + Env + " is unset; start one with: eval \"$(scripts/pgtest.sh start)\""
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: .ci/run must start it)")
		}
		t.Skip(msg)
	}
	return u
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

// Restart restarts the server ("fast": sessions are ended; "immediate":
// as after a crash). It needs the cluster of scripts/pgtest.sh
// ($RALPH_TEST_PG_DIR); without it the test is skipped (failed under
// CI=true).
func Restart(t testing.TB, mode string) {
	t.Helper()
	if os.Getenv("RALPH_TEST_PG_DIR") == "" {
		msg := "restarting the server needs the cluster of scripts/pgtest.sh ($RALPH_TEST_PG_DIR)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	out, err := exec.Command("bash", script(t), "restart", mode).CombinedOutput()
	if err != nil {
		t.Fatalf("pgtest: restart: %v\n%s", err, out)
	}
}

// script is the path of scripts/pgtest.sh.
func script(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("pgtest: cannot find scripts/pgtest.sh")
	}
	return filepath.Join(strings.TrimSuffix(filepath.Dir(file), filepath.FromSlash("dag/postgres/pgtest")), "scripts", "pgtest.sh")
}
