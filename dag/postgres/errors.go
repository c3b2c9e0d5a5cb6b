package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PostgreSQL's error codes the store tells apart.
const (
	codeUniqueViolation   = "23505"
	codeSerialization     = "40001"
	codeDeadlock          = "40P01"
	codeInvalidPassword   = "28P01"
	codeInvalidAuth       = "28000"
	codeNoDatabase        = "3D000"
	codeUndefinedTable    = "42P01"
	codeAdminShutdown     = "57P01"
	codeCrashShutdown     = "57P02"
	codeCannotConnectNow  = "57P03"
	classConnection       = "08"
	classInsufficientRsrc = "53"
)

// NoPlanError is ErrNoPlan naming the database and the plan: Open with
// Config.Create makes the plan. The CLI words it with the command that
// does (ralph init --db URL --plan NAME).
type NoPlanError struct {
	// Server is the database, its URL without a password (Redact).
	Server string
	// Plan is the plan's name.
	Plan string
}

func (e *NoPlanError) Error() string {
	return fmt.Sprintf("%v: %s has no ralph plan %q", ErrNoPlan, e.Server, e.Plan)
}

func (e *NoPlanError) Unwrap() error { return ErrNoPlan }

// OtherRepositoryError is ErrOtherRepository: the plan was made for the
// repository whose root commit is Recorded, and the one opening it has
// Ours (each shortened to 12 digits). A plan of another name keeps the
// two apart.
type OtherRepositoryError struct {
	// Plan names the plan and the server ("plan app on postgres://…").
	Plan string
	// Recorded and Ours are the root commits.
	Recorded, Ours string
}

func (e *OtherRepositoryError) Error() string {
	return fmt.Sprintf("%v: %s was made for the repository whose root commit is %s; this one's is %s (another plan name keeps them apart)",
		ErrOtherRepository, e.Plan, e.Recorded, e.Ours)
}

func (e *OtherRepositoryError) Unwrap() error { return ErrOtherRepository }

// MissingTablesError: the plan's tables are not in its schema (dropped
// by hand). Detail is the server's message. The CLI words it with the
// command that makes them (ralph init --db URL).
type MissingTablesError struct {
	// Plan names the plan and the server ("plan app on postgres://…").
	Plan   string
	Detail string
}

func (e *MissingTablesError) Error() string {
	return fmt.Sprintf("postgres: %s: the plan's tables are missing (%s)", e.Plan, e.Detail)
}

// temporary marks an error that may pass if the call is made again: the
// loop retries the outcome of finished work on those (loop.TaskStore).
type temporary struct{ error }

func (temporary) Temporary() bool { return true }
func (e temporary) Unwrap() error { return e.error }

// connectErr says in words why a connection failed, without the password.
func connectErr(cc *pgx.ConnConfig, err error) error {
	where := fmt.Sprintf("%s@%s:%d/%s", cc.User, cc.Host, cc.Port, cc.Database)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && (pe.Code == codeInvalidPassword || pe.Code == codeInvalidAuth):
		return fmt.Errorf("%w to %s: the server refused user %s (%s); the password comes from PGPASSWORD or ~/.pgpass, never from ralph's files",
			ErrConnect, where, cc.User, pe.Message)
	case errors.As(err, &pe) && pe.Code == codeNoDatabase:
		return fmt.Errorf("%w to %s: %s", ErrConnect, where, pe.Message)
	case errors.As(err, &pe):
		return fmt.Errorf("%w to %s: %s (%s)", ErrConnect, where, pe.Message, pe.Code)
	case isConnectionTrouble(err):
		return temporary{fmt.Errorf("%w to %s: %v", ErrConnect, where, unwrapConnect(err))}
	}
	return fmt.Errorf("%w to %s: %v", ErrConnect, where, unwrapConnect(err))
}

// unwrapConnect is the innermost error of a failed connection: pgconn's
// own message repeats the host and user. pgconn joins the errors of its
// attempts, a line each — with sslmode=prefer, one with TLS and one without,
// to the same address — so that the same words came twice: each is said
// once.
func unwrapConnect(err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		err = ce.Unwrap()
	}
	return sayOnce(err)
}

// sayOnce is err with each line of its message said once (its chain
// kept).
func sayOnce(err error) error {
	parts := strings.FieldsFunc(err.Error(), func(r rune) bool { return r == '\n' })
	var once []string
	for _, p := range parts {
		if !slices.Contains(once, p) {
			once = append(once, p)
		}
	}
	if len(once) == len(parts) {
		return err
	}
	return &saidOnce{msg: strings.Join(once, "\n"), err: err}
}

// saidOnce is err with the repeats taken out of its message.
type saidOnce struct {
	msg string
	err error
}

func (e *saidOnce) Error() string { return e.msg }
func (e *saidOnce) Unwrap() error { return e.err }

// isConnectionTrouble reports whether err means the server could not be
// reached or the connection was lost: the call may succeed later.
func isConnectionTrouble(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, classConnection) || strings.HasPrefix(pe.Code, classInsufficientRsrc) ||
			pe.Code == codeAdminShutdown || pe.Code == codeCrashShutdown || pe.Code == codeCannotConnectNow
	}
	if strings.Contains(err.Error(), "conn busy") {
		return false // a bug of ours, not the network's
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &ne) || errors.As(err, &ce) || pgconn.SafeToRetry(err) ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "connection reset")
}

// Err implements dag.Server.
func (s *server) Err(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == codeUndefinedTable:
		return &MissingTablesError{Plan: s.name, Detail: pe.Message}
	case errors.As(err, &pe) && (pe.Code == codeDeadlock || pe.Code == codeSerialization):
		return temporary{fmt.Errorf("postgres: %s: %w", s.name, err)}
	case isConnectionTrouble(err):
		return temporary{fmt.Errorf("postgres: %s: the server is unreachable or went away: %w", s.name, sayOnce(err))}
	}
	return err
}

// Retryable implements dag.Server.
func (s *server) Retryable(err error, committing bool) bool {
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && (pe.Code == codeDeadlock || pe.Code == codeSerialization):
		// The transaction failed, and rolled back.
		return true
	case committing:
		// Lost while committing: the commit may have happened. Only
		// a commit never sent is safe to send again. A shutdown's
		// FATAL (57P01) can come right after the COMMIT's own
		// answer, which the driver then never reports: the server
		// is asked (Committed).
		return pgconn.SafeToRetry(err) || errors.Is(err, driver.ErrBadConn)
	case pe != nil:
		// The server answered: the transaction is over, and changed
		// nothing.
		return pe.Code == codeAdminShutdown || pe.Code == codeCrashShutdown || pe.Code == codeCannotConnectNow
	}
	return isConnectionTrouble(err)
}

// TxID implements dag.Server. pg_current_xact_id and pg_xact_status
// (xid8) need PostgreSQL 13 or later.
func (s *server) TxID() string { return `pg_current_xact_id()::text` }

// Committed implements dag.Server: pg_xact_status, PostgreSQL's answer
// to exactly this question ("in progress" until a terminated backend has
// rolled back; NULL once the id is too old to tell).
func (s *server) Committed(ctx context.Context, id string) (committed, ok bool, err error) {
	var status sql.NullString
	if err := s.db.QueryRowContext(ctx, `SELECT pg_xact_status($1::xid8)`, id).Scan(&status); err != nil {
		return false, false, err
	}
	switch status.String {
	case "committed":
		return true, true, nil
	case "aborted":
		return false, true, nil
	}
	return false, false, nil
}

// IsUnique implements dag.Server.
func (s *server) IsUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == codeUniqueViolation
}
