package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/loop"
)

// pwUser is the role of the test cluster that needs a password
// (scripts/pgtest.sh), and pwSecret its password.
const (
	pwUser   = "ralph_pw"
	pwSecret = "secret"
)

// closedPort returns a local TCP port nothing listens on: one that was
// free a moment ago.
func closedPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestOpenBadURL: a URL that does not parse is ErrBadURL, and a server
// that is not there is ErrConnect, at once; neither message shows the
// password of the URL.
func TestOpenBadURL(t *testing.T) {
	const pw = "hunter2-do-not-show"
	tests := []struct {
		name string
		url  string
		want error
	}{
		{"not a URL at all", "postgres://ralph:" + pw + "@db.example:notaport/ralph", postgres.ErrBadURL},
		{"unknown sslmode", "postgres://ralph:" + pw + "@127.0.0.1:5432/ralph?sslmode=sometimes", postgres.ErrBadURL},
		{"key=value with a bad port", "host=127.0.0.1 port=seventy user=ralph password=" + pw + " dbname=ralph", postgres.ErrBadURL},
		{"quoted key=value password, bad port", "host=127.0.0.1 port=x user=ralph password='" + pw + " two' dbname=ralph", postgres.ErrBadURL},
		{"an unencoded @ in the password, bad port", "postgres://ralph:" + pw + "@x@127.0.0.1:x/ralph", postgres.ErrBadURL},
		{"password in the query, bad port", "postgres://ralph@127.0.0.1:x/ralph?password=" + pw, postgres.ErrBadURL},
		{"empty", "  ", postgres.ErrBadURL},
		{"nothing listening", fmt.Sprintf("postgres://ralph:%s@127.0.0.1:%d/ralph?sslmode=disable", pw, closedPort(t)), postgres.ErrConnect},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			s, err := postgres.Open(t.Context(), postgres.Config{URL: tt.url, Plan: "app", Create: true})
			took := time.Since(start)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%s) succeeded, want %v", tt.url, tt.want)
			}
			t.Logf("Open: %v", err)
			if !errors.Is(err, tt.want) {
				t.Errorf("Open: %v, want %v", err, tt.want)
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("error %q shows the password", err)
			}
			if took > 5*time.Second {
				t.Errorf("Open took %v, want an answer at once", took)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"postgres://ralph:pw@db.example:5432/ralph?sslmode=disable", "postgres://ralph@db.example:5432/ralph?sslmode=disable"},
		{"postgres://ralph@db.example/ralph?password=pw&sslmode=disable", "postgres://ralph@db.example/ralph?sslmode=disable"},
		{"postgres://ralph:pw@db.example:port/ralph", "postgres://ralph@db.example:port/ralph"},
		{"postgres://ralph:p@w@db.example:port/ralph", "postgres://ralph@db.example:port/ralph"},
		{"postgres://ralph@db.example:port/ralph?password=pw&sslmode=disable", "postgres://ralph@db.example:port/ralph?sslmode=disable"},
		{"host=db user=ralph password=pw dbname=ralph", "host=db user=ralph dbname=ralph"},
		{"host=db password = 'p w\\' x' user=ralph", "host=db user=ralph"},
		{"postgres://db.example/ralph", "postgres://db.example/ralph"},
	} {
		if got := postgres.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestOpenPassword: a password the server refuses is ErrConnect, naming
// the user and where the password comes from, without the password; the
// right one from PGPASSWORD, or from a password file, opens the plan.
func TestOpenPassword(t *testing.T) {
	admin := pgtest.URL(t)
	const wrong = "not-the-secret-42"
	t.Run("refused", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			url  string
			env  string
		}{
			{"in the URL", pgtest.WithUser(t, admin, url.UserPassword(pwUser, wrong)), ""},
			{"in PGPASSWORD", pgtest.WithUser(t, admin, url.User(pwUser)), wrong},
		} {
			t.Run(tt.name, func(t *testing.T) {
				t.Setenv("PGPASSWORD", tt.env)
				t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
				s, err := postgres.Open(t.Context(), postgres.Config{URL: tt.url, Plan: "app", Create: true})
				if err == nil {
					s.Close()
					t.Fatal("Open with a wrong password succeeded")
				}
				msg := err.Error()
				t.Logf("Open: %v", err)
				if !errors.Is(err, postgres.ErrConnect) {
					t.Errorf("Open: %v, want ErrConnect", err)
				}
				for _, want := range []string{"the server refused user " + pwUser, "PGPASSWORD", ".pgpass"} {
					if !strings.Contains(msg, want) {
						t.Errorf("error %q does not say %q", msg, want)
					}
				}
				if strings.Contains(msg, wrong) || strings.Contains(msg, pwSecret) {
					t.Errorf("error %q shows a password", msg)
				}
				var temp interface{ Temporary() bool }
				if errors.As(err, &temp) && temp.Temporary() {
					t.Errorf("a refused password is Temporary: retrying cannot help")
				}
			})
		}
	})
	t.Run("PGPASSWORD", func(t *testing.T) {
		t.Setenv("PGPASSWORD", pwSecret)
		s, err := postgres.Open(t.Context(), postgres.Config{URL: pgtest.WithUser(t, admin, url.User(pwUser)), Plan: "app", Create: true})
		if err != nil {
			t.Fatalf("Open with PGPASSWORD: %v", err)
		}
		defer s.Close()
		if _, err := s.Add(t.Context(), dag.AddParams{ID: "a", Title: "works"}); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(s.Path(), pwSecret) {
			t.Errorf("the store's name %q shows the password", s.Path())
		}
	})
	t.Run("password file", func(t *testing.T) {
		t.Setenv("PGPASSWORD", "")
		pass := filepath.Join(t.TempDir(), "pgpass")
		if err := os.WriteFile(pass, []byte("*:*:*:"+pwUser+":"+pwSecret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PGPASSFILE", pass)
		s, err := postgres.Open(t.Context(), postgres.Config{URL: pgtest.WithUser(t, admin, url.User(pwUser)), Plan: "app"})
		if err != nil {
			t.Fatalf("Open with a password file: %v", err)
		}
		defer s.Close()
		if got, err := s.Get(t.Context(), "a"); err != nil || got.Title != "works" {
			t.Errorf("Get(a) = %+v, %v", got, err)
		}
	})
	t.Run("URL redacted", func(t *testing.T) {
		raw := pgtest.WithUser(t, admin, url.UserPassword(pwUser, pwSecret))
		s, err := postgres.Open(t.Context(), postgres.Config{URL: raw, Plan: "app"})
		if err != nil {
			t.Fatalf("Open with the password in the URL: %v", err)
		}
		defer s.Close()
		if strings.Contains(s.Path(), pwSecret) {
			t.Errorf("the store's name %q shows the password", s.Path())
		}
	})
}

// registryExists reports whether the database has ralph's registry.
func registryExists(t testing.TB, raw string) bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(t.Context(), `SELECT to_regclass('ralph.plans') IS NOT NULL`).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestOpenNoPlan: a database without ralph's schema, and one without the
// plan asked for, are a *NoPlanError (ErrNoPlan) naming the plan and the
// server, in the library's words (the CLI adds its command); opening
// changes neither.
func TestOpenNoPlan(t *testing.T) {
	raw := pgtest.URL(t)
	_, err := postgres.Open(t.Context(), postgres.Config{URL: raw, Plan: "app"})
	var np *postgres.NoPlanError
	if !errors.Is(err, postgres.ErrNoPlan) || !errors.As(err, &np) || np.Plan != "app" || np.Server != postgres.Redact(raw) ||
		!strings.Contains(err.Error(), `"app"`) || strings.Contains(err.Error(), "ralph init") {
		t.Errorf("Open in a database without ralph's schema: %v, want a *NoPlanError naming the plan, not a command", err)
	}
	if registryExists(t, raw) {
		t.Errorf("Open without Create made ralph's registry")
	}
	if plans, err := postgres.Plans(t.Context(), raw); err != nil || len(plans) != 0 {
		t.Errorf("Plans of a database without ralph's schema = %v, %v; want none", plans, err)
	}

	for _, name := range []string{"web", "api"} {
		s, err := postgres.Open(t.Context(), postgres.Config{URL: raw, Plan: name, Create: true})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	before := dumpDB(t, raw)
	_, err = postgres.Open(t.Context(), postgres.Config{URL: raw, Plan: "app"})
	if !errors.As(err, &np) || np.Plan != "app" {
		t.Errorf("Open of a missing plan among others: %v, want a *NoPlanError", err)
	}
	if diff := cmp.Diff(before, dumpDB(t, raw)); diff != "" {
		t.Errorf("Open of a missing plan changed the database (-before +after):\n%s", diff)
	}
	plans, err := postgres.Plans(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range plans {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"web", "api"}, names); diff != "" {
		t.Errorf("plans (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "a\nb", strings.Repeat("x", 201)} {
		if s, err := postgres.Open(t.Context(), postgres.Config{URL: raw, Plan: bad, Create: true}); err == nil {
			s.Close()
			t.Errorf("Open of plan %q succeeded", bad)
		}
	}
}

// dumpDB returns the rows of ralph's registry and of every table of every
// plan's schema, in a stable order.
func dumpDB(t testing.TB, raw string) []string {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_schema = 'ralph' OR table_schema LIKE 'ralph\_plan\_%' ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Schema, Name string }])
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tb := range tables {
		name := pgx.Identifier{tb.Schema, tb.Name}.Sanitize()
		rows, err := conn.Query(ctx, `SELECT t::text FROM `+name+` t`)
		if err != nil {
			t.Fatal(err)
		}
		vals, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(vals)
		for _, v := range vals {
			out = append(out, name+v)
		}
		out = append(out, name)
	}
	return out
}

// TestOpenSchemaTooNew: a plan whose schema a newer ralph wrote is
// refused with dag.ErrSchemaTooNew, with or without Create, and left as
// it was.
func TestOpenSchemaTooNew(t *testing.T) {
	raw := pgtest.URL(t)
	s, err := postgres.Open(t.Context(), postgres.Config{URL: raw, Plan: "app", RootCommit: "aaaa", Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(t.Context(), dag.AddParams{ID: "a", Title: "a"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	pgtest.Exec(t, raw, fmt.Sprintf(`UPDATE ralph.plans SET schema_version = %d WHERE name = 'app'`, postgres.SchemaVersion()+1))
	before := dumpDB(t, raw)
	for _, cfg := range []postgres.Config{
		{URL: raw, Plan: "app"},
		{URL: raw, Plan: "app", Create: true},
		{URL: raw, Plan: "app", RootCommit: "aaaa", Create: true},
		{URL: raw, Plan: "app", RootCommit: "bbbb"},
	} {
		s, err := postgres.Open(t.Context(), cfg)
		if err == nil {
			s.Close()
			t.Fatalf("Open(%+v) of a newer plan succeeded", cfg)
		}
		if !errors.Is(err, dag.ErrSchemaTooNew) {
			t.Errorf("Open(%+v): %v, want dag.ErrSchemaTooNew", cfg, err)
		}
		if !strings.Contains(err.Error(), "upgrade ralph") || !strings.Contains(err.Error(), fmt.Sprint(postgres.SchemaVersion()+1)) {
			t.Errorf("error %q does not name the version and say to upgrade ralph", err)
		}
	}
	if diff := cmp.Diff(before, dumpDB(t, raw)); diff != "" {
		t.Errorf("refused opens changed the database (-before +after):\n%s", diff)
	}
}

// TestManyPlans: one database keeps plans apart: the tasks of one are not
// in another, the same ids live in both, and each plan belongs to the
// repository it was made for.
func TestManyPlans(t *testing.T) {
	raw := pgtest.URL(t)
	ctx := t.Context()
	open := func(plan, root string, create bool) (*dag.Store, error) {
		s, err := postgres.Open(ctx, postgres.Config{URL: raw, Plan: plan, RootCommit: root, Create: create})
		if err == nil {
			t.Cleanup(func() { s.Close() })
		}
		return s, err
	}
	const rootA, rootB = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	web, err := open("web", rootA, true)
	if err != nil {
		t.Fatal(err)
	}
	api, err := open("api", rootB, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"shared", "web-only"} {
		if _, err := web.Add(ctx, dag.AddParams{ID: id, Title: "web " + id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := api.Add(ctx, dag.AddParams{ID: "shared", Title: "api shared"}); err != nil {
		t.Fatalf("the same id in another plan: %v", err)
	}
	if _, err := web.Claim(ctx, loop.ClaimParams{TaskID: "shared", Agent: "agent-web"}); err != nil {
		t.Fatal(err)
	}
	list := func(s *dag.Store) []string {
		ts, err := s.List(ctx, dag.ListParams{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, task := range ts {
			out = append(out, fmt.Sprintf("%s %s %s", task.ID, task.Title, task.Status))
		}
		return out
	}
	if diff := cmp.Diff([]string{"shared web shared in_progress", "web-only web web-only pending"}, list(web)); diff != "" {
		t.Errorf("web's tasks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"shared api shared pending"}, list(api)); diff != "" {
		t.Errorf("api's tasks (-want +got):\n%s", diff)
	}
	if _, err := api.Get(ctx, "web-only"); !errors.Is(err, loop.ErrNotFound) {
		t.Errorf("api.Get(web-only): %v, want loop.ErrNotFound", err)
	}
	if c, err := api.Counts(ctx, loop.Scope{}); err != nil || c != (loop.Counts{Pending: 1}) {
		t.Errorf("api's counts = %+v, %v; want one pending task", c, err)
	}
	if ready, err := api.Claim(ctx, loop.ClaimParams{Agent: "agent-api"}); err != nil || ready.ID != "shared" {
		t.Errorf("api's claim = %+v, %v; want its own shared", ready, err)
	}

	// The root commit.
	_, err = open("web", rootB, false)
	var other *postgres.OtherRepositoryError
	if !errors.Is(err, postgres.ErrOtherRepository) || !errors.As(err, &other) || other.Recorded != rootA[:12] ||
		other.Ours != rootB[:12] || !strings.Contains(err.Error(), rootA[:12]) || !strings.Contains(err.Error(), rootB[:12]) ||
		strings.Contains(err.Error(), "--plan") {
		t.Errorf("Open of web from repository B: %v, want an *OtherRepositoryError naming both root commits, not a flag", err)
	}
	if _, err := open("web", rootB, true); !errors.Is(err, postgres.ErrOtherRepository) {
		t.Errorf("Open of web from repository B with Create: %v, want ErrOtherRepository", err)
	}
	for _, root := range []string{rootA, ""} {
		s, err := open("web", root, false)
		if err != nil {
			t.Errorf("Open of web with root commit %q: %v", root, err)
			continue
		}
		if got, err := s.Get(ctx, "web-only"); err != nil || got.Title != "web web-only" {
			t.Errorf("Get(web-only) = %+v, %v", got, err)
		}
	}
	// A plan made without a repository belongs to the first that opens it.
	if _, err := open("loose", "", true); err != nil {
		t.Fatal(err)
	}
	if _, err := open("loose", rootB, false); err != nil {
		t.Fatalf("first repository to open a plan made without one: %v", err)
	}
	if _, err := open("loose", rootA, false); !errors.Is(err, postgres.ErrOtherRepository) {
		t.Errorf("second repository to open it: %v, want ErrOtherRepository", err)
	}
	plans, err := postgres.Plans(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range plans {
		got = append(got, p.Name+" "+p.RootCommit)
		if p.SchemaVersion != postgres.SchemaVersion() {
			t.Errorf("plan %s at schema version %d, want %d", p.Name, p.SchemaVersion, postgres.SchemaVersion())
		}
	}
	if diff := cmp.Diff([]string{"web " + rootA, "api " + rootB, "loose " + rootB}, got); diff != "" {
		t.Errorf("plans (-want +got):\n%s", diff)
	}
}

// TestMissingTables: a plan whose tables were dropped by hand answers
// every call with a *MissingTablesError naming the plan, in the library's
// words (the CLI adds the command that makes them).
func TestMissingTables(t *testing.T) {
	raw := pgtest.URL(t)
	s, err := postgres.Open(t.Context(), postgres.Config{URL: raw, Plan: "gone", Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := pgx.Connect(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `DROP TABLE ralph_plan_`+strconv.Itoa(planID(t, raw, "gone"))+`.tasks CASCADE`); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(t.Context(), "t-1")
	var missing *postgres.MissingTablesError
	if !errors.As(err, &missing) || missing.Plan != s.Path() || missing.Detail == "" ||
		!strings.Contains(err.Error(), "the plan's tables are missing") || strings.Contains(err.Error(), "ralph init") {
		t.Errorf("Get on a plan without its tables: %v, want a *MissingTablesError naming the plan, not a command", err)
	}
}

// planID is the id of the plan name in raw's registry.
func planID(t testing.TB, raw, name string) int {
	t.Helper()
	plans, err := postgres.Plans(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plans {
		if p.Name == name {
			return p.ID
		}
	}
	t.Fatalf("no plan %s", name)
	return 0
}
