// Package memstore is the memory store (quota.MemoryStore): a
// backend.Store and backend.StateStore that lives in one process. Package
// quota names it and decides on it in process (Store.Decide), with no
// allocation but the Reservation a Take returns.
package memstore
