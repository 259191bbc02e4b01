// Results large enough (128 KiB) that the host may take their memory over
// instead of copying it (vmrt hands a result over only when nothing else can
// reach its buffer): fresh results, one result returned twice, an argument
// returned as is, a slice of an argument, and results held by a global too.

util.global private mutable @last = dense<0.0> : tensor<128x256xf32>

// A fresh result: 2 * x.
func.func @double(%x: tensor<128x256xf32>) -> tensor<128x256xf32> {
  %y = arith.addf %x, %x : tensor<128x256xf32>
  return %y : tensor<128x256xf32>
}

// The same result twice.
func.func @twice(%x: tensor<128x256xf32>) -> (tensor<128x256xf32>, tensor<128x256xf32>) {
  %y = arith.addf %x, %x : tensor<128x256xf32>
  return %y, %y : tensor<128x256xf32>, tensor<128x256xf32>
}

// The argument itself.
func.func @identity(%x: tensor<128x256xf32>) -> tensor<128x256xf32> {
  return %x : tensor<128x256xf32>
}

// The first half of the rows of the argument.
func.func @head(%x: tensor<256x256xf32>) -> tensor<128x256xf32> {
  %h = tensor.extract_slice %x[0, 0] [128, 256] [1, 1] : tensor<256x256xf32> to tensor<128x256xf32>
  return %h : tensor<128x256xf32>
}

// last += x; returns the new value, which the global keeps too.
func.func @accumulate(%x: tensor<128x256xf32>) -> tensor<128x256xf32> {
  %l = util.global.load @last : tensor<128x256xf32>
  %n = arith.addf %l, %x : tensor<128x256xf32>
  util.global.store %n, @last : tensor<128x256xf32>
  return %n : tensor<128x256xf32>
}

// The global's current value.
func.func @recall() -> tensor<128x256xf32> {
  %l = util.global.load @last : tensor<128x256xf32>
  return %l : tensor<128x256xf32>
}
