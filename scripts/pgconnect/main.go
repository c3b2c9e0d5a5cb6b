// Command pgconnect opens one connection to the PostgreSQL server at the
// URL it is given, configured as ralph's store configures its own
// (postgres.ParseURL, pgx), runs SELECT 1 and exits. Without an argument
// it exits at once. scripts/bench-postgres.sh times both: the difference
// is what one connection's set-up costs a process (TCP, start-up message,
// authentication, the server forking a backend).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/ralph-dev/ralph/dag/postgres"
)

func main() {
	if len(os.Args) < 2 {
		return
	}
	if err := connect(context.Background(), os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "pgconnect:", err)
		os.Exit(1)
	}
}

func connect(ctx context.Context, url string) error {
	cc, err := postgres.ParseURL(url)
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}
