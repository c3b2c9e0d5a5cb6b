package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// Errors of Open, wrapped with the plan and the server; check them with
// errors.Is. Open also returns dag.ErrSchemaTooNew.
var (
	// ErrNoPlan: the database has no plan of that name (or no ralph
	// schema at all): Open with Config.Create makes one. The error is a
	// *NoPlanError.
	ErrNoPlan = errors.New("postgres: no such plan in the database")
	// ErrOtherRepository: the plan was made for a repository with another
	// root commit. The error is an *OtherRepositoryError.
	ErrOtherRepository = errors.New("postgres: the plan belongs to another repository")
	// ErrConnect: the server could not be reached, or refused the user.
	ErrConnect = errors.New("postgres: cannot connect")
	// ErrBadURL: the URL does not parse.
	ErrBadURL = errors.New("postgres: bad database URL")
)

// Config says which plan on which server Open opens.
type Config struct {
	// URL is the database: "postgres://user@host:port/dbname?…" (any form
	// pgx accepts, key=value too). A password in it is used, but ralph
	// never writes it anywhere; PGPASSWORD and ~/.pgpass work as for psql.
	URL string
	// Plan names the plan; one database holds many.
	Plan string
	// RootCommit is the repository's root commit: recorded with a new
	// plan, and checked against the recorded one (a clone of another
	// repository is refused). "" skips both.
	RootCommit string
	// Create makes the plan (and ralph's registry) if missing.
	Create bool
	// Options of the store: the clock, how long writes wait for the
	// plan's lock, how long a lost server is retried, who hears of an
	// outage.
	Options dag.ServerOptions
	// AnswerTimeout is how long the server may stay silent while ralph
	// waits for its answer before the connection counts as lost and the
	// call is retried on a new one: a network partition drops packets
	// without a word. Zero means DefaultAnswerTimeout.
	AnswerTimeout time.Duration
}

//go:embed migrations/*.sql
var embeddedMigrations embed.FS

// migrationFS holds the migrations; tests swap in a longer list.
var migrationFS fs.FS = embeddedMigrations

func migrations() ([]string, error) {
	return dag.ReadMigrations(migrationFS, "migrations")
}

// SchemaVersion is the version of a plan's schema this build of ralph
// writes on PostgreSQL.
func SchemaVersion() int {
	m, _ := migrations()
	return len(m)
}

// registry is ralph's own schema: the plans of the database.
const registry = `CREATE SCHEMA IF NOT EXISTS ralph;
CREATE TABLE IF NOT EXISTS ralph.plans (
	id             serial PRIMARY KEY,
	name           text NOT NULL UNIQUE CHECK (name <> ''),
	root_commit    text NOT NULL DEFAULT '',
	schema_version integer NOT NULL DEFAULT 0,
	created_at     timestamptz NOT NULL DEFAULT now()
)`

// lockKey is the first key of ralph's advisory locks ("RALP"); the second
// is a plan's id, or 0 for the registry.
const lockKey = 0x52414c50

// Plan describes a plan of the database.
type Plan struct {
	ID            int
	Name          string
	RootCommit    string
	SchemaVersion int
	CreatedAt     time.Time
}

// schema is the name of the plan's own schema.
func (p Plan) schema() string { return "ralph_plan_" + strconv.Itoa(p.ID) }

// Open opens (with cfg.Create, makes) the plan cfg.Plan on the server
// cfg.URL names and returns its store. Errors: ErrBadURL, ErrConnect (the
// server unreachable, the password refused), ErrNoPlan,
// ErrOtherRepository, dag.ErrSchemaTooNew; each says what to do.
func Open(ctx context.Context, cfg Config) (*dag.Store, error) {
	if strings.TrimSpace(cfg.Plan) == "" {
		return nil, errors.New("postgres: no plan name")
	}
	if err := CheckPlanName(cfg.Plan); err != nil {
		return nil, err
	}
	cc, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	where := fmt.Sprintf("plan %s on %s", cfg.Plan, Redact(cfg.URL))
	conn, pooled, err := connectFirst(ctx, cc)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	plan, err := preparePlan(ctx, conn, cfg, where)
	if err != nil {
		return nil, err
	}
	if pooled {
		cc = withoutSessionParams(cc)
	}
	return openPlan(ctx, cc, plan, where, cfg, pooled)
}

// connectFirst opens Open's connection and finds out whether a pooler
// in transaction pooling stands between ralph and the server (pooled):
// it refuses the session's startup parameters (PgBouncer), or drops them
// (the idle timeout ralph asked for is not the session's). Behind one,
// the connection returned carries none (withoutSessionParams).
func connectFirst(ctx context.Context, cc *pgx.ConnConfig) (conn *pgx.Conn, pooled bool, err error) {
	first := oneShot(cc)
	if first.RuntimeParams == nil {
		first.RuntimeParams = map[string]string{}
	}
	asked, own := first.RuntimeParams["idle_in_transaction_session_timeout"]
	if !own {
		asked = fmt.Sprint(idleInTransaction.Milliseconds())
		first.RuntimeParams["idle_in_transaction_session_timeout"] = asked
	}
	conn, err = pgx.ConnectConfig(ctx, first)
	if err == nil && !own {
		var got string
		err = conn.QueryRow(ctx, `SELECT setting FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'`,
			pgx.QueryExecModeSimpleProtocol).Scan(&got)
		if err == nil && got == asked {
			return conn, false, nil
		}
		conn.Close(context.Background())
		if err != nil {
			return nil, false, connectErr(cc, err)
		}
	} else if err == nil {
		return conn, false, nil
	} else if !isRefusedParam(err) {
		return nil, false, connectErr(cc, err)
	}
	conn, err = connect(ctx, withoutSessionParams(cc))
	return conn, true, err
}

// CheckPlanName refuses plan names that would not survive a command line
// or a message intact: empty, over 200 bytes, control characters.
func CheckPlanName(name string) error {
	if name == "" || len(name) > 200 {
		return fmt.Errorf("postgres: plan name %q: want 1 to 200 bytes", name)
	}
	for _, r := range name {
		if r < ' ' || r == 0x7f {
			return fmt.Errorf("postgres: plan name %q: no control characters", name)
		}
	}
	return nil
}

// ParseURL parses a database URL (or key=value string) as pgx does,
// refusing what pgx would only fail on later.
func ParseURL(raw string) (*pgx.ConnConfig, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, fmt.Errorf("%w: empty", ErrBadURL)
	}
	cc, err := pgx.ParseConfig(raw)
	if err != nil {
		// pgx's message repeats the URL, password and all: say it
		// without.
		return nil, fmt.Errorf("%w %s: %v", ErrBadURL, Redact(raw), redactErr(err, raw))
	}
	cc.ConnectTimeout = cmpOr(cc.ConnectTimeout, 10*time.Second)
	return cc, nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Redact returns a URL without its password, as ralph shows and stores
// it; a string that is no URL comes back with any password=… removed. A
// URL that does not parse loses everything between its user's ':' and
// its last '@': the password's bounds are a guess then, and a guess must
// err on the side of hiding too much.
func Redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		if u.User != nil {
			u.User = url.User(u.User.Username())
		}
		q := u.Query()
		if q.Has("password") || q.Has("sslpassword") {
			q.Del("password")
			q.Del("sslpassword")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	if scheme, rest, ok := strings.Cut(raw, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			user, _, _ := strings.Cut(rest[:at], ":")
			rest = user + rest[at:]
		}
		return scheme + "://" + strings.TrimRight(queryPassword.ReplaceAllString(rest, "$1"), "?&")
	}
	return strings.Join(strings.Fields(kvPassword.ReplaceAllString(raw, "")), " ")
}

var (
	// kvPassword matches a password in a key=value connection string:
	// password=secret, password = 'with spaces \' and quotes'.
	kvPassword = regexp.MustCompile(`(?:^|\s)(?:ssl)?password\s*=\s*(?:'(?:[^'\\]|\\.)*'?|\S*)`)
	// queryPassword matches a password in a URL's query.
	queryPassword = regexp.MustCompile(`([?&])(?:ssl)?password=[^&#]*&?`)
)

// secrets are the passwords raw holds, as best they can be found.
func secrets(raw string) []string {
	var out []string
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
		}
		q := u.Query()
		out = append(out, q["password"]...)
		out = append(out, q["sslpassword"]...)
	} else if _, rest, ok := strings.Cut(raw, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				out = append(out, pw)
			}
		}
	}
	for _, m := range kvPassword.FindAllString(raw, -1) {
		_, v, _ := strings.Cut(m, "=")
		v = strings.TrimSpace(v)
		out = append(out, v, strings.Trim(v, "'"))
	}
	return out
}

// redactErr is err's message without the passwords of raw.
func redactErr(err error, raw string) string {
	msg := err.Error()
	for _, pw := range secrets(raw) {
		if pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// oneShot returns a copy of cc for a connection that runs a few
// statements once (Open's, Plans'): none is prepared by name, so none
// is left in a server session a pooler hands to another client.
func oneShot(cc *pgx.ConnConfig) *pgx.ConnConfig {
	out := cc.Copy()
	out.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	return out
}

// connect opens one connection, with errors in words.
func connect(ctx context.Context, cc *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, connectErr(cc, err)
	}
	return conn, nil
}

// preparePlan finds the plan (making it and the registry with
// cfg.Create), checks its repository and brings its schema up to date.
func preparePlan(ctx context.Context, conn *pgx.Conn, cfg Config, where string) (Plan, error) {
	ms, err := migrations()
	if err != nil {
		return Plan{}, err
	}
	plan, found, err := findPlan(ctx, conn, cfg.Plan)
	if err != nil {
		return Plan{}, fmt.Errorf("postgres: %s: %w", where, err)
	}
	if !found && !cfg.Create {
		return Plan{}, &NoPlanError{Server: Redact(cfg.URL), Plan: cfg.Plan}
	}
	if found && plan.SchemaVersion > len(ms) {
		return Plan{}, fmt.Errorf("%w: %s has schema version %d, this ralph knows up to %d; upgrade ralph",
			dag.ErrSchemaTooNew, where, plan.SchemaVersion, len(ms))
	}
	if found && cfg.RootCommit != "" && plan.RootCommit != "" && plan.RootCommit != cfg.RootCommit {
		return Plan{}, otherRepo(where, plan.RootCommit, cfg.RootCommit)
	}
	if found && plan.SchemaVersion == len(ms) && (plan.RootCommit != "" || cfg.RootCommit == "") {
		return plan, nil
	}
	if cfg.Options.ReadOnly {
		// Read-only: nothing is made, claimed or migrated.
		switch {
		case !found:
			return Plan{}, &NoPlanError{Server: Redact(cfg.URL), Plan: cfg.Plan}
		case plan.SchemaVersion != len(ms):
			return Plan{}, fmt.Errorf("postgres: %s has schema version %d; this ralph needs %d and does not migrate a plan opened read-only: any other ralph command (ralph status) migrates it",
				where, plan.SchemaVersion, len(ms))
		}
		return plan, nil
	}
	// Make or migrate it, under the registry's lock: processes opening a
	// new plan at once make it once.
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, lockKey); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, registry); err != nil {
			return err
		}
		var err error
		if plan, found, err = findPlanTx(ctx, tx, cfg.Plan, true); err != nil {
			return err
		}
		if !found {
			if !cfg.Create {
				return &NoPlanError{Server: Redact(cfg.URL), Plan: cfg.Plan}
			}
			if err := tx.QueryRow(ctx, `INSERT INTO ralph.plans (name, root_commit) VALUES ($1, $2)
				RETURNING id, name, root_commit, schema_version, created_at`, cfg.Plan, cfg.RootCommit).
				Scan(&plan.ID, &plan.Name, &plan.RootCommit, &plan.SchemaVersion, &plan.CreatedAt); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{plan.schema()}.Sanitize()); err != nil {
				return err
			}
		}
		switch {
		case plan.SchemaVersion > len(ms):
			return fmt.Errorf("%w: %s has schema version %d, this ralph knows up to %d; upgrade ralph",
				dag.ErrSchemaTooNew, where, plan.SchemaVersion, len(ms))
		case cfg.RootCommit != "" && plan.RootCommit != "" && plan.RootCommit != cfg.RootCommit:
			return otherRepo(where, plan.RootCommit, cfg.RootCommit)
		case cfg.RootCommit != "" && plan.RootCommit == "":
			// A plan made without a repository is claimed by the first.
			if _, err := tx.Exec(ctx, `UPDATE ralph.plans SET root_commit = $1 WHERE id = $2`, cfg.RootCommit, plan.ID); err != nil {
				return err
			}
			plan.RootCommit = cfg.RootCommit
		}
		if plan.SchemaVersion == len(ms) {
			return nil
		}
		if _, err := tx.Exec(ctx, `SET LOCAL search_path TO `+pgx.Identifier{plan.schema()}.Sanitize()); err != nil {
			return err
		}
		for v := plan.SchemaVersion; v < len(ms); v++ {
			if _, err := tx.Exec(ctx, ms[v]); err != nil {
				return fmt.Errorf("migration to schema version %d: %w", v+1, err)
			}
		}
		plan.SchemaVersion = len(ms)
		_, err = tx.Exec(ctx, `UPDATE ralph.plans SET schema_version = $1 WHERE id = $2`, plan.SchemaVersion, plan.ID)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNoPlan) || errors.Is(err, dag.ErrSchemaTooNew) || errors.Is(err, ErrOtherRepository) {
			return Plan{}, err
		}
		return Plan{}, fmt.Errorf("postgres: %s: %w", where, err)
	}
	return plan, nil
}

func otherRepo(where, recorded, ours string) error {
	return &OtherRepositoryError{Plan: where, Recorded: short(recorded), Ours: short(ours)}
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// findPlan looks the plan up; a database without ralph's registry has
// no plans.
func findPlan(ctx context.Context, conn *pgx.Conn, name string) (Plan, bool, error) {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('ralph.plans') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return Plan{}, false, err
	}
	return findPlanTx(ctx, conn, name, false)
}

func findPlanTx(ctx context.Context, q querier, name string, lock bool) (Plan, bool, error) {
	var p Plan
	query := `SELECT id, name, root_commit, schema_version, created_at FROM ralph.plans WHERE name = $1`
	if lock {
		query += ` FOR UPDATE`
	}
	err := q.QueryRow(ctx, query, name).Scan(&p.ID, &p.Name, &p.RootCommit, &p.SchemaVersion, &p.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Plan{}, false, nil
	}
	return p, err == nil, err
}

// Plans lists the plans of the database at rawURL, oldest first.
func Plans(ctx context.Context, rawURL string) ([]Plan, error) {
	cc, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	conn, err := connect(ctx, oneShot(cc))
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('ralph.plans') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return nil, err
	}
	rows, err := conn.Query(ctx, `SELECT id, name, root_commit, schema_version, created_at FROM ralph.plans ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Plan, error) {
		var p Plan
		err := r.Scan(&p.ID, &p.Name, &p.RootCommit, &p.SchemaVersion, &p.CreatedAt)
		return p, err
	})
}

// openPlan opens the store of plan: a pool for reads and a connector for
// the writer, both with the plan's schema as their search path — set by
// each transaction when pooled (see pooledConn).
func openPlan(ctx context.Context, cc *pgx.ConnConfig, plan Plan, where string, cfg Config, pooled bool) (*dag.Store, error) {
	lc := cc.Copy()
	if lc.RuntimeParams == nil {
		lc.RuntimeParams = map[string]string{}
	}
	if !pooled {
		lc.RuntimeParams["search_path"] = plan.schema()
	}
	lc.RuntimeParams["application_name"] = "ralph"
	// The listeners' connections wait for notifications, silent by
	// design: only the pool's and the writer's wait for answers.
	pc := withAnswerTimeout(lc, cfg.AnswerTimeout)
	var conn driver.Connector = batchConnector{stdlib.GetConnector(*pc)}
	if pooled {
		delete(pc.RuntimeParams, "idle_in_transaction_session_timeout")
		conn = pooledConnector{Connector: stdlib.GetConnector(*pc), setup: sessionSetup(plan.schema())}
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(4)
	// lockSQL takes the plan's lock, sharedSQL its shared form, then
	// returns the transaction's id (dag.Server.LockPlan).
	srv := &server{
		name:    where,
		cc:      pc,
		db:      db,
		conn:    conn,
		plan:    plan,
		pooled:  pooled,
		lockSQL: fmt.Sprintf(`SELECT pg_current_xact_id()::text FROM (SELECT pg_advisory_xact_lock(%d, %d)) AS l`, lockKey, plan.ID),
		sharedSQL: fmt.Sprintf(`SELECT pg_current_xact_id()::text FROM (SELECT pg_advisory_xact_lock_shared(%d, %d)) AS l`,
			lockKey, plan.ID),
	}
	if pooled {
		srv.listen = newPoller(db, plan.schema())
		srv.view = srv.listen
	} else {
		listen := newListener(lc, plan.ID, plan.schema())
		listen.lazy = true
		srv.listen = listen
		view := newListener(lc, plan.ID, plan.schema(), plan.schema()+"_claims")
		view.view = &[2]int32{viewKey, int32(plan.ID)}
		srv.view = view
	}
	return dag.OpenServer(ctx, srv, cfg.Options)
}

// viewKey is the first key of the advisory lock a viewer of a plan waits
// for or holds ("RALV"; the second key is the plan's id): while one does,
// the plan's claims notify the channel <schema>_claims, which viewers
// listen on (migration 0005).
const viewKey = 0x52414c56

// changeSource tells a plan's waits of its changes: a listener, or
// behind a pooler a poller.
type changeSource interface {
	token(ctx context.Context) (string, error)
	wait(ctx context.Context, token string, d time.Duration) (bool, error)
	close()
}

// viewChanges is the loop.ChangeWatcher of dag.Server.ViewChanges.
type viewChanges struct{ l changeSource }

func (v viewChanges) ChangeToken(ctx context.Context) (string, error) { return v.l.token(ctx) }

func (v viewChanges) WaitChange(ctx context.Context, token string, d time.Duration) (bool, error) {
	return v.l.wait(ctx, token, d)
}

// server is the dag.Server of one plan on PostgreSQL.
type server struct {
	name      string
	cc        *pgx.ConnConfig
	db        *sql.DB
	conn      driver.Connector
	plan      Plan
	lockSQL   string
	sharedSQL string
	pooled    bool         // behind a pooler in transaction pooling
	listen    changeSource // the plan's changes
	view      changeSource // and its claims, for viewers (the same poller when pooled)

	rebinds sync.Map // query → rebound query
}

var _ dag.Server = (*server)(nil)

func (s *server) Name() string                { return s.name }
func (s *server) DB() *sql.DB                 { return s.db }
func (s *server) Connector() driver.Connector { return s.conn }
func (s *server) LockPlan() string            { return s.lockSQL }
func (s *server) LockPlanShared() string      { return s.sharedSQL }
func (s *server) ReadTx() bool                { return s.pooled }
func (s *server) ForUpdate() string           { return " FOR UPDATE" }
func (s *server) ClaimSkipLocked() string     { return " FOR UPDATE SKIP LOCKED" }

func (s *server) Rebind(q string) string {
	if r, ok := s.rebinds.Load(q); ok {
		return r.(string)
	}
	r := rebind(q)
	s.rebinds.Store(q, r)
	return r
}

func (s *server) ChangeToken(ctx context.Context) (string, error) {
	return s.listen.token(ctx)
}

func (s *server) WaitChange(ctx context.Context, token string, d time.Duration) (bool, error) {
	return s.listen.wait(ctx, token, d)
}

// ViewChanges implements dag.Server: a listener of its own, opened at its
// first token, whose connection makes the plan's claims notify.
func (s *server) ViewChanges() loop.ChangeWatcher { return viewChanges{s.view} }

func (s *server) Close() error {
	s.listen.close()
	if s.view != s.listen {
		s.view.close()
	}
	return s.db.Close()
}
