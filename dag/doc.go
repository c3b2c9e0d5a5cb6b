// Package dag is ralph's task graph: a SQLite database (modernc.org/sqlite,
// pure Go) holding tasks, their dependencies, parents, logs, features and
// iteration receipts. Store implements loop.TaskStore.
package dag
