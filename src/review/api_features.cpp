#include "api_features.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <vector>

#include "cudal1/review/code_fingerprint.hpp"

namespace cudal1::review {
namespace {

using Words = std::vector<std::string_view>;

// What sharing a feature says about two files: a use honest candidates rarely need (a thread, a
// Tensor subclass) says much; one they often have (in-place ops on temporaries, torch.empty for
// outputs, a cache of the compiled extension) says a third as much.
constexpr double kRare = 1.0;
constexpr double kCommon = 0.35;

// A feature is present when any of its patterns occurs. Patterns are plain names, not regular
// expressions, so the table reads as a list of APIs.
struct ApiRule {
  ApiFeatureInfo info;
  Words names;    // a Python name token, wherever it appears (`x.data_ptr()`, `data_ptr`)
  Words modules;  // a resolved attribute chain equal to or under this path
  Words native;   // a name of embedded C++/CUDA source, qualified or not ("std::thread")
  Words strings;  // a substring of a string literal that is not code (paths, compiler flags)
};

const std::array<ApiRule, 24>& rules() {
  static const std::array<ApiRule, 24> table = {{
      {{"threads", "threads, processes or async tasks that can work outside the timed call", kRare},
       {"Thread", "ThreadPoolExecutor", "ProcessPoolExecutor", "start_new_thread"},
       {"threading", "_thread", "concurrent.futures", "multiprocessing", "asyncio", "os.fork"},
       {"pthread_create", "std::thread", "std::jthread", "std::async"},
       {}},
      {{"side_streams", "CUDA streams other than the current one", kRare},
       {"Stream", "ExternalStream", "wait_stream", "set_stream", "record_stream"},
       {"torch.cuda.stream", "torch.cuda.streams"},
       {"cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority",
        "getStreamFromPool", "cudaStreamNonBlocking"},
       {}},
      {{"timers", "timing APIs: events, clocks, elapsed time", kRare},
       {"Event", "elapsed_time", "perf_counter", "perf_counter_ns"},
       {"time.time", "time.monotonic", "timeit", "torch.cuda.Event"},
       {"cudaEventRecord", "cudaEventElapsedTime", "clock64", "globaltimer"},
       {}},
      {{"tensor_subclass", "Tensor subclasses, __torch_function__/__torch_dispatch__, __class__",
        kRare},
       {"__torch_function__", "__torch_dispatch__", "_make_subclass", "_make_wrapper_subclass",
        "as_subclass", "__class__"},
       {},
       {},
       {}},
      {{"deferred_hooks", "hooks that run later: __getattr__, __del__, weakref finalizers", kRare},
       {"__getattr__", "__getattribute__", "__del__", "__array__", "__array_function__",
        "register_hook", "finalize"},
       {"weakref"},
       {},
       {}},
      {{"data_ptr", "addresses and storages of tensors read from Python", kRare},
       {"data_ptr", "untyped_storage", "storage", "storage_offset", "_cdata"},
       {},
       {},
       {}},
      {{"object_identity", "id() or hash() of objects (keys of a cache)", kRare}, {}, {}, {}, {}},
      {{"caching", "caches and global state kept across calls", kCommon},
       {"global", "nonlocal", "globals", "lru_cache", "memoize"},
       {"functools.cache", "functools.lru_cache"},
       {},
       {}},
      {{"monkey_patch", "assigning attributes of torch or other modules, builtins, sys.modules",
        kRare},
       {"__builtins__"},
       {"builtins", "importlib", "sys.modules"},
       {},
       {}},
      {{"introspection", "gc, inspect, frames: reading other objects (the reference's outputs)",
        kRare},
       {"f_back", "f_locals", "f_globals", "tb_frame", "_getframe", "get_objects", "get_referrers",
        "__subclasses__"},
       {"gc", "inspect", "traceback", "sys._getframe"},
       {},
       {}},
      {{"uninitialized_alloc", "uninitialised allocations (empty, empty_like)", kCommon},
       {"empty", "empty_like", "new_empty", "empty_strided"},
       {},
       {},
       {}},
      {{"filesystem", "files, shared memory, pickling: state outside the process", kRare},
       {"mmap", "shared_memory"},
       {"pickle", "shelve", "tempfile", "mmap", "torch.save", "torch.load", "numpy.save",
        "numpy.load"},
       {"shm_open", "mmap"},
       {"/dev/shm", "/tmp/"}},
      {{"denormal_flush", "flushing denormals to zero", kRare},
       {"set_flush_denormal"},
       {},
       {},
       {"-ftz=true", "--ftz"}},
      {{"tf32", "TF32 or reduced-precision matmul switches", kRare},
       {"allow_tf32", "set_float32_matmul_precision", "allow_fp16_reduced_precision_reduction",
        "allow_bf16_reduced_precision_reduction"},
       {},
       {"tf32", "__float_to_tf32"},
       {}},
      {{"autocast", "autocast / automatic mixed precision", kRare},
       {"autocast", "GradScaler"},
       {"torch.amp", "torch.cuda.amp"},
       {},
       {}},
      {{"half_precision", "float16/bfloat16 arithmetic", kCommon},
       {"half", "float16", "bfloat16", "HalfTensor", "BFloat16Tensor"},
       {},
       {"__half", "__half2", "half2", "__nv_bfloat16", "__nv_bfloat162", "__float2half",
        "__float2half_rn", "__float2bfloat16"},
       {}},
      {{"inplace_ops", "in-place tensor methods (x.add_) and out= arguments", kCommon},
       {},
       {},
       {},
       {}},
      {{"constant_output", "constant-filled tensors (zeros, ones, full, fill_)", kCommon},
       {"zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones",
        "new_full", "fill_", "zero_"},
       {},
       {},
       {}},
      {{"task_redefinition", "the candidate defines get_inputs, get_init_inputs or Model", kRare},
       {},
       {},
       {},
       {}},
      {{"task_access", "calls into the task: get_inputs(), Model(), the __main__ module", kRare},
       {},
       {"__main__"},
       {},
       {}},
      {{"rng_control", "seeding or reading random-number generator state", kRare},
       {"manual_seed", "manual_seed_all", "get_rng_state", "set_rng_state", "initial_seed",
        "default_generator", "fork_rng"},
       {"random.seed", "numpy.random.seed"},
       {},
       {}},
      {{"l2_persistence", "persisting-L2 access policy windows", kRare},
       {"accessPolicyWindow"},
       {},
       {"cudaAccessPolicyWindow", "accessPolicyWindow", "cudaLimitPersistingL2CacheSize",
        "cudaAccessPropertyPersisting", "cudaStreamAttributeAccessPolicyWindow",
        "cudaCtxResetPersistingL2Cache", "hitRatio"},
       {}},
      {{"native_access", "ctypes, cffi, dlopen: calling native libraries directly", kRare},
       {"CDLL", "cdll", "dlopen"},
       {"ctypes", "cffi"},
       {"dlopen", "dlsym"},
       {"libcuda.so", "libcudart.so"}},
      {{"process_hooks", "sleeping, signals, exit hooks, tracing", kRare},
       {"sleep", "settrace", "setprofile"},
       {"atexit", "signal", "sys.settrace", "sys.setprofile", "os.kill", "os._exit"},
       {"usleep", "nanosleep", "__nanosleep"},
       {}},
  }};
  return table;
}

bool contains(const Words& words, std::string_view text) {
  return std::find(words.begin(), words.end(), text) != words.end();
}

// `path` equals `prefix` or lies under it ("torch.cuda.Stream" is under "torch.cuda").
bool under(std::string_view path, std::string_view prefix) {
  return path.size() >= prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
         (path.size() == prefix.size() || path[prefix.size()] == '.');
}

bool has_name_from(const AnalysedSource& a, const Words& names) {
  return std::any_of(a.python.begin(), a.python.end(), [&](const SourceToken& t) {
    return t.kind == TokenKind::kName && contains(names, t.text);
  });
}

bool has_chain_under(const AnalysedSource& a, const Words& modules) {
  return std::any_of(a.chains.begin(), a.chains.end(), [&](const AttributeChain& c) {
    return std::any_of(modules.begin(), modules.end(),
                       [&](std::string_view m) { return under(c.resolved, m); });
  });
}

bool has_native_name(const AnalysedSource& a, const Words& names) {
  return std::any_of(a.native_names.begin(), a.native_names.end(),
                     [&](const std::string& name) { return contains(names, name); });
}

bool has_string_with(const AnalysedSource& a, const Words& needles) {
  return std::any_of(a.strings.begin(), a.strings.end(), [&](const std::string& s) {
    return std::any_of(needles.begin(), needles.end(),
                       [&](std::string_view n) { return s.find(n) != std::string::npos; });
  });
}

bool is_call_of_builtin(const AnalysedSource& a, std::size_t i, std::string_view name) {
  return a.is_name(i, name) && a.is_operator(i + 1, "(") && !a.is_operator(i - 1, ".") &&
         !a.is_name(i - 1, "def");
}

bool imported(const AnalysedSource& a, const std::string& name) {
  return a.aliases.count(name) > 0;
}

// Features that need more than one token to see.
void detect_patterns(const AnalysedSource& a, std::set<std::string>& found) {
  for (std::size_t i = 0; i < a.python.size(); ++i) {
    const SourceToken& t = a.python[i];
    if (t.kind != TokenKind::kName) continue;
    if (is_call_of_builtin(a, i, "id") || is_call_of_builtin(a, i, "hash")) {
      found.insert("object_identity");
    }
    if (is_call_of_builtin(a, i, "open")) found.insert("filesystem");
    // Names such as self._cache or _MEMO (but not torch.cuda.empty_cache, which frees memory).
    std::string lower(t.text);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if ((lower.find("cache") != std::string::npos || lower.find("memo") != std::string::npos) &&
        t.text != "empty_cache") {
      found.insert("caching");
    }
    // x.add_(...), y.relu_(): one trailing underscore, not a dunder.
    if (a.is_operator(i - 1, ".") && a.is_operator(i + 1, "(") && t.text.size() > 1 &&
        t.text.back() == '_' && t.text[t.text.size() - 2] != '_' && t.text.front() != '_') {
      found.insert("inplace_ops");
    }
    if (t.text == "out" && a.is_operator(i + 1, "=") &&
        (a.is_operator(i - 1, ",") || a.is_operator(i - 1, "("))) {
      found.insert("inplace_ops");
    }
    if (a.is_name(i - 1, "def") && (t.text == "get_inputs" || t.text == "get_init_inputs")) {
      found.insert("task_redefinition");
    }
    if (a.is_name(i - 1, "class") && t.text == "Model") found.insert("task_redefinition");
    if (!a.is_name(i - 1, "def") && !a.is_name(i - 1, "class") && a.is_operator(i + 1, "(") &&
        (t.text == "get_inputs" || t.text == "get_init_inputs" || t.text == "Model")) {
      found.insert("task_access");
    }
    // setattr(torch, ...), setattr(F, "relu", ...) on an imported module.
    if (is_call_of_builtin(a, i, "setattr") && a.token(i + 2).kind == TokenKind::kName &&
        imported(a, a.token(i + 2).text)) {
      found.insert("monkey_patch");
    }
  }
  for (const AttributeChain& chain : a.chains) {
    const std::string& head = a.python[chain.first].text;
    // class Lazy(torch.Tensor): a Tensor subclass.
    if (chain.resolved == "torch.Tensor" && a.is_operator(chain.first - 1, "(") &&
        a.is_name(chain.first - 3, "class")) {
      found.insert("tensor_subclass");
    }
    // torch.cuda.synchronize = ..., F.relu = ...: assignment to a module's attribute.
    if (chain.last > chain.first && imported(a, head) && a.is_operator(chain.last + 1, "=")) {
      found.insert("monkey_patch");
    }
  }
}

}  // namespace

std::span<const ApiFeatureInfo> api_feature_catalog() {
  static const std::vector<ApiFeatureInfo> catalog = [] {
    std::vector<ApiFeatureInfo> out;
    for (const ApiRule& rule : rules()) out.push_back(rule.info);
    return out;
  }();
  return catalog;
}

std::set<std::string> detect_api_features(const AnalysedSource& source) {
  std::set<std::string> found;
  for (const ApiRule& rule : rules()) {
    if (has_name_from(source, rule.names) || has_chain_under(source, rule.modules) ||
        has_native_name(source, rule.native) || has_string_with(source, rule.strings)) {
      found.emplace(rule.info.name);
    }
  }
  detect_patterns(source, found);
  return found;
}

}  // namespace cudal1::review
