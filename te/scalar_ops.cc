// Implements the scalar semantics of te's operations.
#include "te/scalar_ops.h"

#include <cmath>
#include <cstring>

#include "support/error.h"
#include "te/bfloat16.h"
#include "te/simplify.h"

namespace ktune::te {

Scalar scalar_normalize(DataType t, Scalar v) {
  if (t.is_float()) {
    // bfloat16 rounds through float32, as codegen converts (so both agree bit for bit).
    if (t.bits == 32) v.f = static_cast<float>(v.f);
    if (t.is_bfloat16()) v.f = round_to_bfloat16(static_cast<float>(v.f));
    return v;
  }
  if (t.bits >= 64) return v;
  if (t.bits == 1) {
    v.i = v.i != 0;
    return v;
  }
  uint64_t mask = (uint64_t{1} << t.bits) - 1;
  uint64_t u = static_cast<uint64_t>(v.i) & mask;
  if (t.is_int() && (u >> (t.bits - 1)) != 0) u |= ~mask;
  v.i = static_cast<int64_t>(u);
  return v;
}

Scalar scalar_binary(NodeKind op, DataType t, Scalar a, Scalar b) {
  Scalar r;
  if (t.is_float()) {
    double x = a.f, y = b.f;
    switch (op) {
      case NodeKind::kAdd:
        r.f = x + y;
        break;
      case NodeKind::kSub:
        r.f = x - y;
        break;
      case NodeKind::kMul:
        r.f = x * y;
        break;
      case NodeKind::kDiv:
        r.f = x / y;
        break;
      case NodeKind::kMod:
        r.f = x - y * std::floor(x / y);
        break;
      case NodeKind::kMin:
        r.f = y < x ? y : x;
        break;
      case NodeKind::kMax:
        r.f = x < y ? y : x;
        break;
      case NodeKind::kEQ:
        r.i = x == y;
        return r;
      case NodeKind::kNE:
        r.i = x != y;
        return r;
      case NodeKind::kLT:
        r.i = x < y;
        return r;
      case NodeKind::kLE:
        r.i = x <= y;
        return r;
      case NodeKind::kGT:
        r.i = x > y;
        return r;
      case NodeKind::kGE:
        r.i = x >= y;
        return r;
      default:
        throw Error(ErrorKind::kInternal, "scalar_binary: bad float op");
    }
    return scalar_normalize(t, r);
  }
  int64_t x = a.i, y = b.i;
  bool u64 = t.is_uint() && t.bits == 64;
  switch (op) {
    case NodeKind::kAdd:
      r.i = static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
      break;
    case NodeKind::kSub:
      r.i = static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
      break;
    case NodeKind::kMul:
      r.i = static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
      break;
    case NodeKind::kDiv:
      if (y == 0) throw Error(ErrorKind::kRun, "integer division by zero");
      r.i = u64 ? static_cast<int64_t>(static_cast<uint64_t>(x) / static_cast<uint64_t>(y))
                : floor_div(x, y);
      break;
    case NodeKind::kMod:
      if (y == 0) throw Error(ErrorKind::kRun, "integer modulo by zero");
      r.i = u64 ? static_cast<int64_t>(static_cast<uint64_t>(x) % static_cast<uint64_t>(y))
                : floor_mod(x, y);
      break;
    case NodeKind::kMin:
      r.i = u64 ? (static_cast<uint64_t>(y) < static_cast<uint64_t>(x) ? y : x) : (y < x ? y : x);
      break;
    case NodeKind::kMax:
      r.i = u64 ? (static_cast<uint64_t>(x) < static_cast<uint64_t>(y) ? y : x) : (x < y ? y : x);
      break;
    case NodeKind::kEQ:
      r.i = x == y;
      return r;
    case NodeKind::kNE:
      r.i = x != y;
      return r;
    case NodeKind::kLT:
      r.i = u64 ? static_cast<uint64_t>(x) < static_cast<uint64_t>(y) : x < y;
      return r;
    case NodeKind::kLE:
      r.i = u64 ? static_cast<uint64_t>(x) <= static_cast<uint64_t>(y) : x <= y;
      return r;
    case NodeKind::kGT:
      r.i = u64 ? static_cast<uint64_t>(x) > static_cast<uint64_t>(y) : x > y;
      return r;
    case NodeKind::kGE:
      r.i = u64 ? static_cast<uint64_t>(x) >= static_cast<uint64_t>(y) : x >= y;
      return r;
    case NodeKind::kAnd:
      r.i = (x != 0) && (y != 0);
      return r;
    case NodeKind::kOr:
      r.i = (x != 0) || (y != 0);
      return r;
    default:
      throw Error(ErrorKind::kInternal, "scalar_binary: bad int op");
  }
  return scalar_normalize(t, r);
}

Scalar scalar_cast(DataType to, DataType from, Scalar v) {
  Scalar r;
  if (to.is_float()) {
    if (from.is_float()) {
      r.f = v.f;
    } else if (from.is_uint() && from.bits == 64) {
      r.f = static_cast<double>(static_cast<uint64_t>(v.i));
    } else {
      r.f = static_cast<double>(v.i);
    }
    return scalar_normalize(to, r);
  }
  if (from.is_float()) {
    if (to.is_bool()) {
      r.i = v.f != 0;
      return r;
    }
    double t = std::trunc(v.f);
    if (std::isnan(t)) t = 0;
    if (t > 9.2e18) t = 9.2e18;
    if (t < -9.2e18) t = -9.2e18;
    r.i = static_cast<int64_t>(t);
  } else {
    r.i = to.is_bool() ? v.i != 0 : v.i;
  }
  return scalar_normalize(to, r);
}

Scalar scalar_call(CallOp op, DataType t, Scalar a, Scalar b) {
  Scalar r;
  if (op == CallOp::kDotU8S8 || op == CallOp::kDotS8S8 || op == CallOp::kDotBF16)
    throw Error(ErrorKind::kInternal,
                std::string("scalar_call: ") + call_op_name(op) + " works on vectors only");
  if (!t.is_float()) {
    if (op != CallOp::kAbs) throw Error(ErrorKind::kInternal, "scalar_call: integer math call");
    r.i = a.i < 0 ? -a.i : a.i;
    return scalar_normalize(t, r);
  }
  double x = a.f;
  switch (op) {
    case CallOp::kExp:
      r.f = std::exp(x);
      break;
    case CallOp::kLog:
      r.f = std::log(x);
      break;
    case CallOp::kSqrt:
      r.f = std::sqrt(x);
      break;
    case CallOp::kTanh:
      r.f = std::tanh(x);
      break;
    case CallOp::kAbs:
      r.f = std::fabs(x);
      break;
    case CallOp::kPow:
      r.f = std::pow(x, b.f);
      break;
    case CallOp::kFloor:
      r.f = std::floor(x);
      break;
    case CallOp::kCeil:
      r.f = std::ceil(x);
      break;
    case CallOp::kRoundEven:
      r.f = std::nearbyint(x);  // the default rounding mode: to nearest, ties to even
      break;
    case CallOp::kSigmoid:
      r.f = 1.0 / (1.0 + std::exp(-x));
      break;
    case CallOp::kDotU8S8:
    case CallOp::kDotS8S8:
    case CallOp::kDotBF16:
      break;  // refused above
  }
  return scalar_normalize(t, r);
}

Scalar scalar_load(const void* base, DataType t, int64_t i) {
  Scalar r;
  const char* p = static_cast<const char*>(base);
  if (t.is_float()) {
    if (t.is_bfloat16()) {
      uint16_t u;
      std::memcpy(&u, p + i * 2, 2);
      r.f = bfloat16_to_float(u);
    } else if (t.bits == 32) {
      float f;
      std::memcpy(&f, p + i * 4, 4);
      r.f = f;
    } else {
      std::memcpy(&r.f, p + i * 8, 8);
    }
    return r;
  }
  switch (t.bytes()) {
    case 1:
      r.i = t.is_int() ? static_cast<int64_t>(reinterpret_cast<const int8_t*>(p)[i])
                       : reinterpret_cast<const uint8_t*>(p)[i];
      break;
    case 2: {
      uint16_t u;
      std::memcpy(&u, p + i * 2, 2);
      r.i = t.is_int() ? static_cast<int16_t>(u) : u;
      break;
    }
    case 4: {
      uint32_t u;
      std::memcpy(&u, p + i * 4, 4);
      r.i = t.is_int() ? static_cast<int32_t>(u) : static_cast<int64_t>(u);
      break;
    }
    default:
      std::memcpy(&r.i, p + i * 8, 8);
      break;
  }
  return r;
}

void scalar_store(void* base, DataType t, int64_t i, Scalar v) {
  char* p = static_cast<char*>(base);
  if (t.is_float()) {
    if (t.is_bfloat16()) {
      const uint16_t u = float_to_bfloat16(static_cast<float>(v.f));
      std::memcpy(p + i * 2, &u, 2);
    } else if (t.bits == 32) {
      float f = static_cast<float>(v.f);
      std::memcpy(p + i * 4, &f, 4);
    } else {
      std::memcpy(p + i * 8, &v.f, 8);
    }
    return;
  }
  switch (t.bytes()) {
    case 1:
      p[i] = static_cast<char>(v.i);
      break;
    case 2: {
      uint16_t u = static_cast<uint16_t>(v.i);
      std::memcpy(p + i * 2, &u, 2);
      break;
    }
    case 4: {
      uint32_t u = static_cast<uint32_t>(v.i);
      std::memcpy(p + i * 4, &u, 4);
      break;
    }
    default:
      std::memcpy(p + i * 8, &v.i, 8);
      break;
  }
}

}  // namespace ktune::te
