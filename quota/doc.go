// Package quota is quotactl's core: an exact, weighted, sliding-window log
// limiter that charges each outbound API call against the upstream's budgets
// before the request leaves.
//
// A Limiter meters one API's Budgets over a Store (MemoryStore here;
// quota/sqlitestore and quota/redisstore beside it). Budgets are kept per
// owner, the upstream's unit of billing (a Google Cloud project for
// YouTube): every Credential of one owner shares its budgets
// (Credential.Owner, or WithOwner for all of a limiter's credentials); a
// credential with no owner is its own. Stores never see a secret, only its
// fingerprint (DefaultFingerprint, or a keyed HMAC with WithFingerprintKey)
// and the caller's label, unique per API. Limiter.Rotate moves a label to a
// new secret that continues the owner's usage.
//
// Take charges every budget a Charge names atomically and returns a
// Reservation; a budget that cannot pay gives an *ExhaustedError with the
// exact RetryAfter. Transport does the same for every request of an
// http.Client.
package quota
