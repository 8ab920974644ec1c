//go:build !unix

package main

import "os"

// termWidth returns 0 (unknown: 80 columns) where the terminal's size is not
// read.
func termWidth(*os.File) int { return 0 }
