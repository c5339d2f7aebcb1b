// The engine's side of transactions: joining the server's transaction when a connection in
// an explicit transaction (BEGIN, autocommit=0, XA) writes a queue table or consumes, and the
// handlerton's commit, rollback and savepoint hooks that end it (core/table/transaction.h
// holds what the transaction did). In autocommit an INSERT or DELETE is a one-statement
// transaction of its own (statement_transaction); a consumer's functions act at once unless
// the binary log records the statement: then they act at its commit, two-phase with the
// binlog (binlogged_statement_transaction).
#pragma once
#include <functional>
#include <string>

class THD;
struct handlerton;

namespace q4m {
class Status;
class Transaction;
}

namespace q4m_engine {

// The transaction thd's statement joins, or null in autocommit. Registers the engine with
// the server for this statement (and the transaction) on first use. Null with an SQL error
// raised (*failed) if the engine cannot take part in a transaction.
q4m::Transaction* joined_transaction(THD* thd, bool* failed);
// The transaction of an autocommit statement that the binary log records (binlog open,
// sql_log_bin on), else null: its changes take effect at the statement's commit, after the
// binlog has them. So no DELETE or consumption of a row can reach the binlog before its INSERT
// does (a replica would stop with error 1032), and a row consumed on the primary is removed
// on a replica too (engine/binlog_statements.h). Registers the engine for the statement.
q4m::Transaction* binlogged_statement_transaction(THD* thd);
// The transaction a row change of thd's statement (INSERT, DELETE) goes into: the joined one,
// else the statement's own, which the server commits at the statement's end (two-phase with
// the binary log when it records the statement, one phase otherwise; the one place where a
// change becomes durable, core/table/transaction.h). Registers the engine for the statement.
// Null with an SQL error raised if the engine cannot join (joined_transaction()).
q4m::Transaction* statement_transaction(THD* thd);
// The transaction a consumer's change (an end, a removal by function) goes into:
// joined_transaction(), else binlogged_statement_transaction(). Null with neither (autocommit,
// nothing binlogged: the change is made at once), and with *failed if joining failed.
q4m::Transaction* consumer_transaction(THD* thd, bool* failed);
// Runs `change` in consumer_transaction(), or, without one, in a transaction of its own
// committed at once. False with an SQL error raised if joining failed; else *status is what
// `change` (or that commit) returned.
bool change_in_transaction(THD* thd, const std::function<q4m::Status(q4m::Transaction&)>& change,
                           q4m::Status* status);
// consumer_transaction() for the end of the rows the connection owns: it also takes the owned
// table's metadata lock until its own end, as a statement that wrote the table would (so DDL
// waits for it instead of moving rows the transaction is removing).
q4m::Transaction* joined_transaction_for_owned(THD* thd, bool* failed);
// The metadata lock a transaction that changes db.table holds until its end (DDL waits for
// it); false with an SQL error raised if lock_wait_timeout passed.
bool lock_until_transaction_end(THD* thd, const std::string& db, const std::string& table);
// The open transaction of thd's connection, without joining (scans see its rows); null if none.
q4m::Transaction* open_transaction(THD* thd);

// Whether thd is in a transaction it started WITH CONSISTENT SNAPSHOT (mariadb-dump
// --single-transaction): its scans see the rows in flight too.
bool in_consistent_snapshot(THD* thd);

void install_transaction_hooks(handlerton* hton);

}  // namespace q4m_engine
