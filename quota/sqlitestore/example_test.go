package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/quotactl/quotactl/quota"
	"github.com/quotactl/quotactl/quota/sqlitestore"
)

// Two processes on one host share a budget through one database file:
// here, two stores opened on the same file.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "quotactl-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "quota.db")

	// An ingestion job: the file is created on first use.
	st, err := sqlitestore.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	l, err := quota.New(st, "youtube", []quota.Budget{{Name: "units", Limit: 10000, Window: quota.Sliding(24 * time.Hour)}})
	if err != nil {
		log.Fatal(err)
	}
	key := quota.Credential{Secret: "AIzaSy-example-key", Label: "yt-key-1"}
	r, err := l.Take(ctx, key, quota.Units("units", 100))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("left after 100:", r.Remaining("units"))
	_, err = l.Take(ctx, key, quota.Units("units", 9950))
	var ee *quota.ExhaustedError
	if errors.As(err, &ee) {
		fmt.Printf("refused: %s used %d of %d, cost %d\n", ee.Budget, ee.Used, ee.Limit, ee.Cost)
	}

	// Another process (quotactl status) opens the same file and finds the
	// budget and the credential's label with no configuration.
	other, err := sqlitestore.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()
	l2, err := quota.Load(ctx, other, "youtube")
	if err != nil {
		log.Fatal(err)
	}
	us, err := l2.Status(ctx, quota.Credential{Label: "yt-key-1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: used %d, remaining %d\n", us[0].Budget, us[0].Used, us[0].Remaining)
	// Output:
	// left after 100: 9900
	// refused: units used 100 of 10000, cost 9950
	// units: used 100, remaining 9900
}
