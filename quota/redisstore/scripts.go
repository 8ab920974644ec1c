package redisstore

import (
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// script returns the script lib.lua + name.lua, or, for take,
// fast.lua + lib.lua + take.lua (fast.lua decides the common case before
// lib.lua is defined): one source, one SHA1, run with EVALSHA. Every
// parameter goes through KEYS and ARGV, so one script serves every budget,
// credential and prefix.
func script(name string) *redis.Script {
	parts := []string{"lib", name}
	if name == "take" {
		parts = []string{"fast", "lib", name}
	}
	var src strings.Builder
	for _, p := range parts {
		b, err := luaFS.ReadFile("lua/" + p + ".lua")
		if err != nil {
			panic(err)
		}
		src.Write(b)
		src.WriteString("\n")
	}
	return redis.NewScript(src.String())
}

var (
	takeScript    = script("take")
	settleScript  = script("settle") // Settle, and Refund (a settle to zero)
	usageScript   = script("usage")
	entriesScript = script("entries")
	adjustScript  = script("adjust")
	exhaustScript = script("exhaust")
	markScript    = script("mark")
)
