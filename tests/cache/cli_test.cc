// Runs the built mpk-tune binary and checks its output and exit status.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cache/cache.h"
#include "test_util.h"

extern char** environ;

namespace mpk::cache {
namespace {

using namespace testing;
using nlohmann::json;

struct Outcome {
  int status = -1;  // exit code; -1 when it did not exit normally (a crash)
  std::string out, err;
  json js() const { return json::parse(out); }
};

class CliTest : public ::testing::Test {
 protected:
  Outcome tune(std::vector<std::string> args) {
    std::vector<std::string> argv_s = {MPK_TUNE_BINARY};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string out_path = (dir / "stdout").string(), err_path = (dir / "stderr").string();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    Outcome r;
    if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) {
      ADD_FAILURE() << "cannot run " << argv[0];
      return r;
    }
    posix_spawn_file_actions_destroy(&fa);
    int status = 0;
    waitpid(pid, &status, 0);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    auto slurp = [](const std::string& p) {
      std::ifstream f(p);
      return std::string(std::istreambuf_iterator<char>(f), {});
    };
    r.out = slurp(out_path);
    r.err = slurp(err_path);
    return r;
  }
  // Runs mpk-tune as a user that permission bits bind (nobody, when the test runs as root).
  // Sets *skip when that is not possible here.
  Outcome tune_unprivileged(std::vector<std::string> args, std::string* skip) {
    std::vector<std::string> argv_s = {MPK_TUNE_BINARY};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string out_path = (dir / "stdout").string(), err_path = (dir / "stderr").string();
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    Outcome r;
    pid_t pid = fork();
    if (pid == 0) {
      dup2(out, 1);
      dup2(err, 2);
      if (!drop_root().empty() || access(argv[0], X_OK) != 0) _exit(kCannotDrop);
      execve(argv[0], argv.data(), environ);
      _exit(kCannotDrop);
    }
    close(out);
    close(err);
    int status = 0;
    waitpid(pid, &status, 0);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (r.status == kCannotDrop) *skip = "cannot run mpk-tune as an unprivileged user here";
    r.out = read_bytes(out_path);
    r.err = read_bytes(err_path);
    return r;
  }
  static constexpr int kCannotDrop = 97;

  Outcome tune_db(std::vector<std::string> args) {
    args.insert(args.begin(), {"--cache", db.string()});
    return tune(std::move(args));
  }
  void fill(int n) {
    Cache cache(options_at(db));
    for (int i = 0; i < n; ++i) cache.publish(make_key(i), make_entry(1000 + i, i, 1.0 + i, i % 3 != 0));
  }

  TempDir dir;
  fs::path db = dir / "kernels.db";
};

TEST_F(CliTest, ListAsTableAndJson) {
  fill(3);
  Outcome r = tune_db({"list"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("3 entries"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(key_digest(make_key(1)).substr(0, 16)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gemv"), std::string::npos);
  EXPECT_NE(r.out.find("sm_90a"), std::string::npos);

  for (auto args : {std::vector<std::string>{"--json", "list"}, std::vector<std::string>{"list", "--json"}}) {
    Outcome j = tune_db(args);
    ASSERT_EQ(j.status, 0) << j.err;
    json doc = j.js();
    ASSERT_EQ(doc["entries"].size(), 3u);
    const json& e = doc["entries"][0];
    EXPECT_EQ(e["key"].get<std::string>().size(), 64u);
    EXPECT_EQ(e["key_text"]["task"]["op"], "gemv");
    EXPECT_TRUE(e["params"].is_object());
    EXPECT_TRUE(e.contains("time_us"));
  }
  Outcome limited = tune_db({"list", "--limit", "2", "--json"});
  EXPECT_EQ(limited.js()["entries"].size(), 2u);
}

TEST_F(CliTest, ShowTakesAUniqueKeyPrefix) {
  fill(20);  // 20 keys over 16 leading hex digits: some first digit is shared
  std::string key = key_digest(make_key(4));
  Outcome r = tune_db({"show", key.substr(0, 12)});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(key), std::string::npos);
  EXPECT_NE(r.out.find("checksum"), std::string::npos);
  EXPECT_NE(r.out.find("\"op\": \"gemv\""), std::string::npos) << r.out;

  Outcome j = tune_db({"show", key.substr(0, 12), "--json"});
  ASSERT_EQ(j.status, 0) << j.err;
  EXPECT_EQ(j.js()["key"], key);
  EXPECT_EQ(j.js()["cubin_bytes"], 1004);

  std::map<char, int> first;
  for (int i = 0; i < 20; ++i) ++first[key_digest(make_key(i))[0]];
  char shared = 0;
  for (auto [c, n] : first)
    if (n > 1) shared = c;
  Outcome ambiguous = tune_db({"show", std::string(1, shared)});
  EXPECT_EQ(ambiguous.status, 1);
  EXPECT_NE(ambiguous.err.find("ambiguous"), std::string::npos) << ambiguous.err;

  Outcome missing = tune_db({"show", "ffffffffffffffffffff"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("no entry"), std::string::npos) << missing.err;
  EXPECT_EQ(tune_db({"show", "not-hex"}).status, 1);
}

TEST_F(CliTest, StatsReportsTheCache) {
  fill(6);
  Outcome j = tune_db({"stats", "--json"});
  ASSERT_EQ(j.status, 0) << j.err;
  EXPECT_EQ(j.js()["entries"], 6);
  EXPECT_EQ(j.js()["verified_entries"], 4);
  EXPECT_EQ(j.js()["schema_version"], 3);
  EXPECT_GT(j.js()["payload_bytes"].get<uint64_t>(), 6000u);
  Outcome t = tune_db({"stats"});
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("6 (4 verified)"), std::string::npos) << t.out;
}

TEST_F(CliTest, PruneToABudget) {
  fill(10);
  Outcome r = tune_db({"prune", "--max-bytes", "3K", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_LE(r.js()["remaining_bytes"].get<uint64_t>(), 3072u);
  EXPECT_GT(r.js()["removed_entries"].get<uint64_t>(), 0u);
  Cache cache(options_at(db));
  EXPECT_EQ(cache.stats().entries, r.js()["remaining_entries"].get<uint64_t>());
  Outcome all = tune_db({"prune", "--max-bytes", "0"});
  ASSERT_EQ(all.status, 0) << all.err;
  EXPECT_NE(all.out.find("0 entries"), std::string::npos) << all.out;
}

TEST_F(CliTest, ExportAndImport) {
  fill(5);
  fs::path out = dir / "export.db";
  Outcome e = tune_db({"export", out.string(), "--json"});
  ASSERT_EQ(e.status, 0) << e.err;
  EXPECT_EQ(e.js()["added"], 5);
  Outcome again = tune_db({"export", out.string()});
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.err.find("exists"), std::string::npos) << again.err;
  EXPECT_EQ(tune_db({"export", out.string(), "--force"}).status, 0);

  fs::path other = dir / "other.db";
  Outcome i = tune({"--cache", other.string(), "import", out.string(), "--json"});
  ASSERT_EQ(i.status, 0) << i.err;
  EXPECT_EQ(i.js()["added"], 5);
  Outcome i2 = tune({"--cache", other.string(), "import", out.string()});
  ASSERT_EQ(i2.status, 0) << i2.err;
  EXPECT_NE(i2.out.find("kept existing"), std::string::npos) << i2.out;
  EXPECT_EQ(tune({"--cache", other.string(), "import", (dir / "missing.db").string()}).status, 1);
}

TEST_F(CliTest, VerifyDropsDamageAndFailsOnce) {
  fill(4);
  RawDb(db).exec("UPDATE blobs SET data = zeroblob(10) WHERE id = (SELECT id FROM kernels WHERE key = '" +
                 key_digest(make_key(2)) + "')");
  Outcome r = tune_db({"verify", "--json"});
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_EQ(r.js()["bad"], 1);
  EXPECT_EQ(r.js()["bad_keys"][0], key_digest(make_key(2)));
  EXPECT_EQ(r.js()["checked"], 4);
  Outcome ok = tune_db({"verify"});
  EXPECT_EQ(ok.status, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("checked 3 entries: 0 bad"), std::string::npos) << ok.out;
}

// Before, the file moved aside on open left a fresh, clean file behind: verify reported
// {"bad":0,"integrity_ok":true} and exit 0.
TEST_F(CliTest, VerifyReportsAFileItMovedAsideOnOpen) {
  fill(4);
  std::string bytes = read_bytes(db);
  bytes[0] = 'X';
  write_database(db, bytes);
  Outcome r = tune_db({"verify", "--json"});
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  ASSERT_EQ(r.js()["moved_aside"].size(), 1u) << r.out;
  EXPECT_TRUE(r.js()["damage_found"].get<bool>());
  EXPECT_EQ(read_bytes(r.js()["moved_aside"][0].get<std::string>()), bytes);  // kept as it was
  EXPECT_NE(r.err.find("kept a copy at"), std::string::npos) << r.err;
  Outcome text = tune_db({"verify"});
  EXPECT_EQ(text.status, 0) << text.out << text.err;
}

// Before, a damaged file opened read-only made verify fail as an error (exit 1), not report
// the damage (3); the file stays as it was.
TEST_F(CliTest, ReadOnlyVerifyReportsADamagedFileAndLeavesIt) {
  fill(4);
  std::string bytes = read_bytes(db);
  bytes[0] = 'X';
  write_database(db, bytes);
  Outcome r = tune_db({"--read-only", "verify", "--json"});
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_TRUE(r.js()["damage_found"].get<bool>()) << r.out;
  EXPECT_NE(r.js()["integrity"].get<std::string>().find("is damaged"), std::string::npos) << r.out;
  Outcome text = tune_db({"--read-only", "verify"});
  EXPECT_EQ(text.status, 3) << text.out << text.err;
  EXPECT_EQ(read_bytes(db), bytes);
  EXPECT_TRUE(moved_aside_in(dir.path()).empty());
}

// Before, a flipped bit in a b-tree page was never repaired: verify exited 3 or 1 on every
// run and list or prune failed with "database disk image is malformed".
TEST_F(CliTest, PageDamageIsRepairedByTheCommandThatMeetsIt) {
  fill(30);
  const std::string pristine = read_bytes(db);
  int repaired = 0;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    for (std::vector<std::string> cmd : {std::vector<std::string>{"list"}, {"prune", "--max-bytes", "20K"},
                                         {"stats"}, {"verify"}}) {
      SCOPED_TRACE(::testing::Message() << cmd[0] << ", seed " << seed);
      for (const fs::path& p : moved_aside_in(dir.path())) fs::remove(p);
      write_database(db, flip_btree_bit(pristine, seed));
      Outcome first = tune_db(cmd);
      EXPECT_EQ(first.status, cmd[0] == "verify" && !moved_aside_in(dir.path()).empty() ? 3 : 0)
          << first.out << first.err;
      EXPECT_EQ(first.err.find("mpk-tune:"), std::string::npos) << first.err;  // no failure
      Outcome check = tune_db({"verify", "--json"});
      EXPECT_TRUE(check.status == 0 || check.status == 3) << check.out << check.err;
      Outcome again = tune_db({"verify", "--json"});
      EXPECT_EQ(again.status, 0) << again.out << again.err;
      EXPECT_LE(moved_aside_in(dir.path()).size(), 1u);
      repaired += !moved_aside_in(dir.path()).empty();
    }
  }
  EXPECT_GT(repaired, 0) << "the damage was never found: the test damages nothing";
}

// Before, even --read-only failed with "attempt to write a readonly database": a WAL file
// needs its -shm, which a folder the user cannot write does not let SQLite create.
TEST_F(CliTest, ReadOnlyCacheInAFolderTheUserCannotWrite) {
  fill(3);
  fs::path shared = dir / "shared";
  fs::create_directories(shared);
  fs::rename(db, shared / "kernels.db");
  fs::path file = shared / "kernels.db";
  const auto read_exec = fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                         fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec;
  fs::permissions(dir.path(), read_exec, fs::perm_options::add);
  fs::permissions(file, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  fs::permissions(shared, read_exec);
  std::string skip;
  Outcome ro = tune_unprivileged({"--cache", file.string(), "--read-only", "list", "--json"}, &skip);
  Outcome plain = tune_unprivileged({"--cache", file.string(), "stats", "--json"}, &skip);
  Outcome prune = tune_unprivileged({"--cache", file.string(), "prune", "--max-bytes", "0"}, &skip);
  fs::permissions(shared, fs::perms::owner_write, fs::perm_options::add);
  if (!skip.empty()) GTEST_SKIP() << skip;
  if (geteuid() != 0 && access(shared.c_str(), W_OK) == 0) GTEST_SKIP() << "this user can write the folder anyway";
  ASSERT_EQ(ro.status, 0) << ro.err;
  EXPECT_EQ(ro.js()["entries"].size(), 3u);
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.js()["entries"], 3);
  EXPECT_TRUE(plain.js()["read_only"].get<bool>());
  EXPECT_EQ(prune.status, 1);
  EXPECT_NE(prune.err.find("read-only"), std::string::npos) << prune.err;
  EXPECT_FALSE(fs::exists(file.string() + "-shm"));
}

// Before: "cannot open kernel cache ...: disk I/O error".
TEST_F(CliTest, ImportOfAFolderSaysItIsAFolder) {
  fs::create_directories(dir / "folder");
  Outcome r = tune_db({"import", (dir / "folder").string()});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("is a directory, not a regular file"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db)) << "the target cache was created for nothing";
  Outcome cache_is_folder = tune({"--cache", (dir / "folder").string(), "list"});
  EXPECT_EQ(cache_is_folder.status, 1);
  EXPECT_NE(cache_is_folder.err.find("is a directory"), std::string::npos) << cache_is_folder.err;
}

// Before, export created the missing folders silently.
TEST_F(CliTest, ExportIntoAMissingFolderFails) {
  fill(2);
  fs::path target = dir / "no" / "such" / "export.db";
  Outcome r = tune_db({"export", target.string()});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("folder " + (dir / "no" / "such").string() + " does not exist"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "no"));
}

TEST_F(CliTest, BadArgumentsGiveUsageAndStatus2) {
  fill(1);
  for (auto args : std::vector<std::vector<std::string>>{
           {},
           {"frobnicate"},
           {"show"},
           {"export"},
           {"list", "--limit", "abc"},
           {"list", "--limit", "-3"},
           {"list", "--bogus"},
           {"prune", "--max-bytes", "12Q"},
           {"prune", "--max-bytes"},
           {"show", "a", "b"},
           {"--json=maybe", "list"},        // a conversion error
           {"list", "--limit", "5", "--limit", "6"},  // an argument count mismatch
           {"--cache"},                     // a missing value
           {"list", "extra"},               // an extra argument
       }) {
    std::string joined;
    for (auto& a : args) joined += a + " ";
    Outcome r = tune_db(args);
    EXPECT_EQ(r.status, 2) << joined << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find("Usage"), std::string::npos) << joined << "\n" << r.err;
  }
  Outcome help = tune({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("verify"), std::string::npos);
}

TEST_F(CliTest, MissingCacheIsAnErrorAndIsNotCreated) {
  Outcome r = tune({"--cache", (dir / "nope" / "kernels.db").string(), "list"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("no kernel cache"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "nope"));
}

TEST_F(CliTest, ReadOnlyRefusesChanges) {
  fill(3);
  Outcome r = tune_db({"--read-only", "prune", "--max-bytes", "0"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("read-only"), std::string::npos) << r.err;
  EXPECT_EQ(tune_db({"--read-only", "list"}).status, 0);
}

TEST_F(CliTest, DefaultLocationComesFromTheEnvironment) {
  fill(2);
  setenv("MPK_CACHE_DIR", dir.path().c_str(), 1);
  Outcome r = tune({"stats", "--json"});
  unsetenv("MPK_CACHE_DIR");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.js()["entries"], 2);
  EXPECT_EQ(r.js()["path"], db.string());
}

TEST_F(CliTest, ListsAndMigratesAV1Cache) {
  fs::copy_file(fs::path(MPK_TEST_DATA) / "cache_v1.db", db);
  fs::permissions(db, fs::perms::owner_write, fs::perm_options::add);
  Outcome r = tune_db({"list"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("3 entries"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("builder-b"), std::string::npos) << r.out;
}


// mpk-tune prove: the plan of a committed fixture is proved from its config.json alone.
TEST_F(CliTest, ProveAFixturesPlan) {
  Outcome r = tune({"prove", "--model", std::string(MPK_TEST_DATA) + "/qwen3-f32", "--json"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("proved").get<bool>());
  ASSERT_FALSE(j.at("records").empty());
  bool attention = false, linear = false, draw = false;
  for (const auto& rec : j.at("records")) {
    for (const auto& o : rec.at("obligations")) EXPECT_EQ(o.at("result"), "proved") << r.out;
    const std::string use = rec.at("use");
    attention |= use.find("attention: KV length over") != std::string::npos;
    linear |= use.find("linear: K over") != std::string::npos;
    draw |= use.find("top-k draw: its sort's stage of distance") != std::string::npos;
  }
  EXPECT_TRUE(attention && linear && draw) << r.out;
  Outcome table = tune({"prove", "--model", std::string(MPK_TEST_DATA) + "/llama-f32", "--workers", "8"});
  EXPECT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("all proved"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("prefill: decode step"), std::string::npos) << table.out;
  // A bf16 model also proves the tensor-core prefill's formulas.
  Outcome bf = tune({"prove", "--model", std::string(MPK_TEST_DATA) + "/qwen2-bf16", "--workers", "8", "--json"});
  ASSERT_EQ(bf.status, 0) << bf.out << bf.err;
  const auto jb = nlohmann::json::parse(bf.out);
  EXPECT_EQ(jb.at("prefill"), "tensor cores");
  bool tile = false, split = false;
  for (const auto& rec : jb.at("records")) {
    const std::string use = rec.at("use");
    tile |= use.find("prefill wgmma_128x256: output tile") != std::string::npos;
    split |= use.find("prefill GEMM: K steps over") != std::string::npos;
  }
  EXPECT_TRUE(tile && split) << bf.out;
}

// mpk-tune coverage: which variant runs each op, from config.json alone; an op no variant runs
// is named with why, the ops it blocks are told apart, and the exit status says so.
TEST_F(CliTest, CoverageOfAFixtureAndOfAModelTheKernelDoesNotRun) {
  Outcome r = tune({"coverage", "--model", std::string(MPK_TEST_DATA) + "/qwen3-bf16", "--json"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("uncovered_ops"), 0);
  EXPECT_EQ(j.at("host_fallback_ops"), 0);
  EXPECT_EQ(j.at("prefill"), "tensor cores");  // a bf16 model's prompts
  for (const auto& op : j.at("ops"))
    if (op.at("op") == "attention") EXPECT_EQ(op.at("prefill"), "pf_kv_store, pf_attention_32");
  std::map<std::string, std::string> runs;
  for (const auto& op : j.at("ops")) {
    EXPECT_EQ(op.at("status"), "megakernel") << op.dump();
    runs[op.at("op").get<std::string>()] = op.at("runs_as").dump();
  }
  EXPECT_NE(runs["linear"].find("linear.r2"), std::string::npos);
  EXPECT_NE(runs["rope"].find("attention"), std::string::npos);
  EXPECT_NE(runs["embedding"].find("argmax"), std::string::npos);

  // The same model with heads of 512: attention has no variant (the kernel holds up to 256).
  nlohmann::json cfg;
  std::ifstream(std::string(MPK_TEST_DATA) + "/qwen3-bf16/config.json") >> cfg;
  cfg["head_dim"] = 512;
  const fs::path model = dir / "hd512";
  fs::create_directories(model);
  std::ofstream(model / "config.json") << cfg.dump();
  Outcome bad = tune({"coverage", "--model", model.string(), "--json"});
  EXPECT_EQ(bad.status, 1) << bad.out << bad.err;
  std::map<std::string, std::string> status;
  const auto jb = nlohmann::json::parse(bad.out);
  for (const auto& op : jb.at("ops")) {
    status[op.at("op").get<std::string>()] = op.at("status").get<std::string>();
    if (op.at("op") == "attention")
      EXPECT_NE(op.at("why").get<std::string>().find("head_dim 512 above max_head_dim 256"),
                std::string::npos) << op.dump();
  }
  EXPECT_EQ(status["attention"], "unsupported") << bad.out << bad.err;
  EXPECT_EQ(status["rope"], "unsupported");
  EXPECT_EQ(status["linear"], "blocked");
  EXPECT_EQ(tune({"coverage"}).status, 2);

  // With hidden_act gelu_pytorch_tanh: the activation has no device variant, the host
  // fallback runs it (one op a layer) between the megakernel's segments; the rest is covered.
  std::ifstream(std::string(MPK_TEST_DATA) + "/qwen3-bf16/config.json") >> cfg;
  cfg["hidden_act"] = "gelu_pytorch_tanh";
  const fs::path gelu = dir / "gelu";
  fs::create_directories(gelu);
  std::ofstream(gelu / "config.json") << cfg.dump();
  Outcome h = tune({"coverage", "--model", gelu.string(), "--json"});
  ASSERT_EQ(h.status, 0) << h.out << h.err;
  const auto jh = nlohmann::json::parse(h.out);
  const int layers = cfg.at("num_hidden_layers");
  EXPECT_EQ(jh.at("host_fallback_ops"), layers);
  EXPECT_EQ(jh.at("segments"), layers + 1);
  EXPECT_EQ(jh.at("uncovered_ops"), 0);
  EXPECT_EQ(jh.at("prefill"), "decode step: gelu_tanh_mul has no prefill kernel");
  for (const auto& op : jh.at("ops"))
    EXPECT_EQ(op.at("status"), op.at("op") == "gelu_tanh_mul" ? "host" : "megakernel") << op.dump();
  Outcome text = tune({"coverage", "--model", gelu.string()});
  EXPECT_NE(text.out.find("2 on the host (host fallback: 3 megakernel launches a step"), std::string::npos)
      << text.out;
}

// mpk-tune coverage on every committed fixture: each op on the device, none on the host.
TEST_F(CliTest, CoverageOfEveryFixture) {
  for (const char* f : {"qwen3-f32", "qwen3-bf16", "qwen2-f32", "qwen2-bf16", "llama-f32", "llama-bf16-sharded"}) {
    Outcome r = tune({"coverage", "--model", std::string(MPK_TEST_DATA) + "/" + f, "--json"});
    ASSERT_EQ(r.status, 0) << f << r.out << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("uncovered_ops"), 0) << f;
    EXPECT_EQ(j.at("host_fallback_ops"), 0) << f;
    EXPECT_EQ(j.at("segments"), 1) << f;
    for (const auto& op : j.at("ops")) EXPECT_EQ(op.at("status"), "megakernel") << f << op.dump();
  }
}

// mpk-tune candidates: the model's defaults first, each candidate through the static filters,
// the proofs and NVRTC with its figures and verdict; the seed orders the others.
TEST_F(CliTest, CandidatesCarryTheirFiguresAndVerdicts) {
  const std::string model = std::string(MPK_TEST_DATA) + "/qwen3-f32";
  Outcome r = tune({"candidates", "--model", model, "--workers", "16", "--max", "3", "--json"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& c = j.at("candidates");
  ASSERT_EQ(c.size(), 3u) << r.out;
  EXPECT_EQ(c[0].at("change"), "defaults");
  EXPECT_EQ(c[0].at("verdict"), "pass");
  EXPECT_GT(c[0].at("registers").get<int>(), 0);
  EXPECT_EQ(c[0].at("spill_store_bytes"), 0);
  EXPECT_GT(c[0].at("obligations").get<int>(), 0);
  for (const auto& x : c) {
    const std::string v = x.at("verdict");
    // "not proved": a proof over its limit rejects a candidate too (seen on a loaded
    // machine under the sanitizers); the proofs' own tests judge the formulas.
    EXPECT_TRUE(v == "pass" || v.rfind("spills ", 0) == 0 || v.rfind("shared memory ", 0) == 0 ||
                v.rfind("invalid: ", 0) == 0 || v.rfind("cannot implement: ", 0) == 0 ||
                v.rfind("not proved: ", 0) == 0)
        << x.dump();
    if (v == "pass") EXPECT_EQ(x.at("spill_store_bytes"), 0) << x.dump();
  }
  Outcome other = tune({"candidates", "--model", model, "--workers", "16", "--max", "2", "--seed", "2",
                        "--json"});
  ASSERT_EQ(other.status, 0) << other.err;
  EXPECT_NE(nlohmann::json::parse(other.out).at("candidates")[1].at("change"), c[1].at("change"));
}

// A search restricted to an axis that does not exist fails before it looks for a GPU.
TEST_F(CliTest, TuneRefusesAnUnknownAxis) {
  Outcome r = tune_db({"tune", "--model", std::string(MPK_TEST_DATA) + "/qwen3-bf16", "--axes",
                       "kv_splits,no_such_axis"});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("no search axis named 'no_such_axis'"), std::string::npos) << r.err;
}

TEST_F(CliTest, ProveOfABadModelOrArgumentsFails) {
  EXPECT_EQ(tune({"prove", "--model", "/nonexistent-model-dir"}).status, 1);
  EXPECT_EQ(tune({"prove"}).status, 2);
  EXPECT_EQ(tune({"prove", "--model", std::string(MPK_TEST_DATA) + "/qwen3-f32", "--workers", "0"}).status, 2);
}

}  // namespace
}  // namespace mpk::cache
