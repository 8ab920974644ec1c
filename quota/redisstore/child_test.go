package redisstore_test
const childEnv = "REDISSTORE_TEST_CHILD"
func childMain() int { return 0 }
