package redistest

import "strings"

// SlotCount is the number of hash slots of a Redis Cluster.
const SlotCount = 16384

// Slot returns the Redis Cluster hash slot of key, computed here (CRC16
// XMODEM of the key's hash tag, or of the whole key when it has none), the
// way the cluster and its clients compute it. Tests compare it with the
// server's CLUSTER KEYSLOT and with where go-redis routed a key.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % SlotCount
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), bit by bit.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
