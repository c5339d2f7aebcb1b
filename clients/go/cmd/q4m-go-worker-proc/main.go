// q4m-go-worker-proc: a Worker in a process of its own, for tests/integration/test_go_worker.py
// (SIGTERM, kill -9 of the worker and of the server).
//
// Each job writes (job id, delivery count, pid) into the InnoDB ledger: inside the job's
// transaction with -transactional, else through the pool. The job whose id is -block-id,
// once its ledger row is written, creates -marker and waits while -block-file exists. On
// exit prints {"in_time": ..., "metrics": {...}} as JSON.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"

	q4m "q4m/clients/go"
)

func main() {
	socket := flag.String("socket", "", "server socket")
	table := flag.String("table", "jobs", "queue table")
	ledger := flag.String("ledger", "ledger", "InnoDB ledger table")
	goroutines := flag.Int("goroutines", 1, "worker goroutines")
	transactional := flag.Bool("transactional", false, "exactly once")
	blockID := flag.Int64("block-id", -1, "job that blocks")
	blockFile := flag.String("block-file", "", "blocks while it exists")
	marker := flag.String("marker", "", "created when the blocking job started")
	flag.Parse()

	db, err := sql.Open("mysql", fmt.Sprintf("root@unix(%s)/test?timeout=10s&readTimeout=180s", *socket))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	pid := fmt.Sprint(os.Getpid())
	w := &q4m.Worker{DB: db, Table: *table, Goroutines: *goroutines, Transactional: *transactional,
		WaitTimeout: 300 * time.Millisecond, ReconnectDelay: 50 * time.Millisecond, ReconnectMaxDelay: 500 * time.Millisecond}
	w.Handler = func(ctx context.Context, job *q4m.Job) error {
		q := "INSERT INTO " + *ledger + " (job_id, delivery, who) VALUES (?, ?, ?)"
		var err error
		if job.Tx != nil {
			_, err = job.Tx.Exec(ctx, q, job.Row["id"], job.DeliveryCount, pid)
		} else {
			_, err = db.ExecContext(ctx, q, job.Row["id"], job.DeliveryCount, pid)
		}
		if err != nil {
			return err
		}
		if fmt.Sprint(job.Row["id"]) == fmt.Sprint(*blockID) && job.DeliveryCount == 1 {
			os.WriteFile(*marker, nil, 0o644)
			for deadline := time.Now().Add(120 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(*blockFile); err != nil {
					break
				}
			}
		}
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	inTime, err := w.Run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out, _ := json.Marshal(map[string]any{"in_time": inTime, "metrics": w.Metrics()})
	fmt.Println(string(out))
}
