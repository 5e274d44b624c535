package drivertest

import "time"

// SetLeakWaitForTest sets how long a check waits for the driver's
// goroutines to end, for the suite's tests of a leaking driver.
func SetLeakWaitForTest(d time.Duration) { leakWait = d }
