package memstore

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"strconv"

	"github.com/quotactl/quotactl/quota/backend"
)

// NonceMax bounds a nonce: 8 characters of prefix and a base-32 uint64.
const NonceMax = 24

// AppendNonce appends a nonce: a prefix random per Limiter (or Store) then
// seq in base 32.
func AppendNonce(b []byte, pfx string, seq uint64) []byte {
	b = append(b, pfx...)
	return strconv.AppendUint(b, seq, 32)
}

// NewNoncePrefix returns a random nonce prefix: 8 characters.
func NewNoncePrefix() string {
	var rnd [5]byte
	_, _ = rand.Read(rnd[:])
	return base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(rnd[:])
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{backend.ErrInvalid}, args...)...)
}
