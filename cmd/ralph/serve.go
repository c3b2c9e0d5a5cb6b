package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/safefile"
	"github.com/ralph-dev/ralph/serve"
)

// defaultServeAddr is where `ralph serve` listens unless --addr says.
const defaultServeAddr = "127.0.0.1:7420"

func serveCommand(cfg appConfig) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve a live web view of the plan, its workers and its costs (read-only)",
		Description: "Opens the plan read-only and serves a page showing the task graph, what each worker of a\n" +
			"running build does, and the receipts' costs, updated live. It listens on loopback unless --addr\n" +
			"says otherwise; any other address needs a token, which every request must then carry.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "addr", Value: defaultServeAddr, Usage: "listen on `HOST:PORT` (port 0: any free port)"},
			&cli.StringFlag{Name: "token", EnvVars: []string{"RALPH_SERVE_TOKEN"}, Usage: "require `TOKEN` on every request (needed off loopback)"},
		},
		Action: func(c *cli.Context) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			return serveAction(c, cfg)
		},
	}
}

func serveAction(c *cli.Context, cfg appConfig) error {
	addr := strings.TrimSpace(c.String("addr"))
	token := c.String("token")
	if err := serve.CheckAddr(addr, token); err != nil {
		return &usageError{cmd: "ralph serve", err: errors.New(strings.TrimPrefix(err.Error(), "serve: "))}
	}
	ro := cfg
	ro.readOnly = true
	p, st, err := openProject(c, ro)
	if err != nil {
		return err
	}
	defer st.Close()
	scfg := serve.Config{Store: st, LogDir: filepath.Join(p.ralph, "logs"), Root: p.root, Token: token, Now: cfg.now}
	if st.Server() == nil {
		scfg.DBPath = p.dbPath()
	}
	if d, err := safefile.OpenDir(p.root, scfg.LogDir); errors.Is(err, safefile.ErrLink) {
		// Not followed, never served (ARCHITECTURE.md §7); said once, here.
		fmt.Fprintf(cfg.stderr, "ralph serve: %v: its logs are not shown\n", err)
	} else if err == nil {
		d.Close()
	}
	err = serve.ListenAndServe(c.Context, addr, scfg, func(url string) {
		fmt.Fprintf(cfg.stdout, "ralph serve: %s\n", url)
		if token != "" {
			fmt.Fprintf(cfg.stderr, "ralph serve: open %s?token=<your token> once; the page keeps it in a cookie\n", url)
		}
	})
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "serve: "))
	}
	return nil
}

var _ serve.Store = (*dag.Store)(nil)
