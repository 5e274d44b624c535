package wireguard_test

import (
	"errors"
	"fmt"
	"time"
)

var testTime = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func sprint(v any) string { return fmt.Sprintf("%v %s %#v %x", v, v, v, v)[:10] }

func errorsIs(err, target error) bool { return errors.Is(err, target) }
