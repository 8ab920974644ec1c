// Package backend is what a quota store implements, as database/sql/driver
// is for database/sql: the Store and StateStore interfaces, the requests
// and results they exchange, and the rules every store applies the same
// way (retention of entries, held entries, the hour breakdown, the
// credential catalog). Users of the limiter need only package quota, which
// names the value types they meet (Budget, Window, Usage, ...) as aliases
// of these.
//
// A store decides one TakeRequest atomically: for an owner and the budgets
// its debits name, it drops expired entries, computes what each window
// counts, and if every budget can pay, records one entry per budget (the
// cost inside the entry) and returns the usage; otherwise it records
// nothing and returns, for each refusing budget, when enough units free
// up. Package storetest is the conformance kit: every store passes
// storetest.Run.
//
// This package imports only the standard library.
package backend
