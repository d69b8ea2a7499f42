package openapi

import (
	"encoding/json"
	"reflect"
)

//go:generate go run ./markergen -o zz_generated.markers.go

// typeMarkers are the comment markers of one API struct type that reflection cannot see (markergen reads them from
// the k8s.io sources). Fields are keyed by JSON name and list only fields with a marker that matters.
type typeMarkers struct {
	MapType string // +structType: x-kubernetes-map-type of the type ("atomic")
	Fields  map[string]fieldMarkers
}

// fieldMarkers are one field's markers.
type fieldMarkers struct {
	// Required and Optional override the json tag: a field is required when it has no omitempty, unless marked
	// +optional (Optional), and a +required field with omitempty is required all the same (Required).
	Required, Optional bool
	ListType           string   // +listType: atomic, set or map
	ListMapKeys        []string // +listMapKey, for ListType map
	MapType            string   // +mapType: atomic or granular
	Default            string   // +default, as JSON
}

// markersOf returns t's markers (the zero value for types markergen did not see).
func markersOf(t reflect.Type) typeMarkers {
	if t.Name() == "" {
		return typeMarkers{}
	}
	return generatedMarkers[t.PkgPath()+"."+t.Name()]
}

// enumOf returns the values of t when it is a +enum type.
func enumOf(t reflect.Type) []string {
	if t.Name() == "" {
		return nil
	}
	return generatedEnums[t.PkgPath()+"."+t.Name()]
}

// defaultValue decodes a +default marker; nil when there is none or it is not JSON (markergen only emits JSON).
func (m fieldMarkers) defaultValue() any {
	if m.Default == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(m.Default), &v); err != nil {
		return nil
	}
	return v
}
