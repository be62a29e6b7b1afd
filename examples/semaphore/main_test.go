package main

import (
	"testing"

	"github.com/lockwarden/lockwarden/internal/exampletest"
)

func TestExampleRuns(t *testing.T) { exampletest.Run(t, run) }
