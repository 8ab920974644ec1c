package redisstore

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// script returns the script lib.lua + name.lua: one source, one SHA1, run
// with EVALSHA. Every parameter goes through KEYS and ARGV, so one script
// serves every budget, credential and prefix.
func script(name string) *redis.Script {
	lib, err := luaFS.ReadFile("lua/lib.lua")
	if err != nil {
		panic(err)
	}
	body, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(lib) + "\n" + string(body))
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
