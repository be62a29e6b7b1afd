// Package api is a fixture of the doccheck test: each identifier whose name starts with Bad lacks the
// comment it needs, each one whose name starts with Good has it.
package api

import "fmt"

// GoodFunc has a doc comment.
func GoodFunc() {}

func BadFunc() {}

func unexported() {}

// GoodType has a doc comment.
type GoodType struct {
	// GoodField has a doc comment.
	GoodField int
	GoodLine  int // GoodLine has a line comment.
	BadField  int
	// GoodA and GoodB share this comment.
	GoodA, GoodB     int
	BadTwo, badThree int
	unexported       int
	// GoodNested has a doc comment; its type's fields need theirs.
	GoodNested struct {
		// GoodInner has a doc comment.
		GoodInner int
		BadInner  int
	}
	GoodType2 // GoodType2 is embedded, with a line comment.
	*BadType
	// Stringer is embedded from another package, with a doc comment.
	fmt.Stringer
	BadSlice []struct {
		BadDeep int
	}
}

type BadType struct{}

// GoodType2 has a doc comment.
type GoodType2 int

type (
	// GoodGrouped has its own comment in a group.
	GoodGrouped int
	BadGrouped  int
)

type unexportedType struct {
	Field int
}

// Method of an unexported type: not part of the API.
func (unexportedType) Exported() {}

// GoodMethod has a doc comment.
func (GoodType) GoodMethod() {}

func (*GoodType) BadMethod() {}

func (g GoodType) unexported() {}

// GoodIface has a doc comment.
type GoodIface interface {
	// GoodM has a doc comment.
	GoodM()
	GoodL() // GoodL has a line comment.
	BadM()
	fmt.Stringer
	unexported()
}

// GoodGeneric has a doc comment.
type GoodGeneric[T any] struct{}

func (GoodGeneric[T]) BadGenericMethod() {}

// GoodConst has a doc comment.
const GoodConst = 1

const BadConst = 2

// GoodEnum has a comment for the whole enumeration.
type GoodEnum int

// The enum's values, documented by the group's comment.
const (
	GoodIota GoodEnum = iota
	GoodIotaNext
	GoodIotaLast
)

// Values of one declared type, documented by the group's comment.
const (
	GoodTyped1 GoodEnum = 10
	GoodTyped2 GoodEnum = 20
)

// Unrelated constants: the group's comment does not document them.
const (
	BadMixed1 = 1
	BadMixed2 = "two"
	// GoodMixed3 has its own comment.
	GoodMixed3 = 3
	GoodMixed4 = 4 // GoodMixed4 has a line comment.
)

// Variables: the group's comment never documents them.
var (
	BadVar1 = 1
	// GoodVar2 has its own comment.
	GoodVar2 = 2
)

// GoodVar has a doc comment.
var GoodVar = 3

var BadVar = 4

// BadEcho
var BadEcho = 5

//go:noinline
func BadDirective() {}

var _ = fmt.Sprint

// Values of one predeclared type: not an enumeration, so the group's comment does not document them.
const (
	BadInt1 int = 1
	BadInt2 int = 2
)
