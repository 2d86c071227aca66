// turbokv chat on a pseudo-terminal, as a user types: libedit line editing
// (left arrow) and history (up arrow), Ctrl-C stopping a reply and the prompt
// coming back, /reset, Ctrl-C at the prompt, and Ctrl-D leaving with a KV summary.
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/model/test_models.h"

namespace {

using Clock = std::chrono::steady_clock;

class PtyChat {
 public:
  PtyChat() {
    pid_ = forkpty(&fd_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      execl(TKV_TURBOKV_BIN, TKV_TURBOKV_BIN, "chat", "--temp", "0", "-n", "400",
            static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~PtyChat() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }
  void send(const std::string& s) { ASSERT_EQ(write(fd_, s.data(), s.size()), ssize_t(s.size())); }
  // Reads until `what` appears after offset `from` of the transcript (or the timeout).
  bool wait_for(const std::string& what, size_t from, double seconds = 60) {
    const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
    while (out_.find(what, from) == std::string::npos) {
      if (Clock::now() > end || !read_some(end)) return false;
    }
    return true;
  }
  // The prompt printed after `what` (found past `from`): input sent before it would
  // reach the terminal in cooked mode, between two reads of the line editor.
  bool wait_for_prompt_after(const std::string& what, size_t from) {
    return wait_for(what, from) && wait_for("> ", out_.find(what, from) + what.size());
  }
  int wait_exit() {
    int st = 0;
    for (int i = 0; i < 150; ++i) {
      // At exit the pty reads fail at once (EIO), so also sleep between polls.
      if (!read_some(Clock::now() + std::chrono::milliseconds(100))) usleep(100 * 1000);
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        exited_ = true;
        while (read_some(Clock::now() + std::chrono::milliseconds(50))) {
        }
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
    }
    return -1;
  }
  const std::string& out() const { return out_; }
  size_t size() const { return out_.size(); }

 private:
  bool read_some(Clock::time_point end) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    fd_set set;
    FD_ZERO(&set);
    FD_SET(fd_, &set);
    timeval tv{0, static_cast<suseconds_t>(std::max<int64_t>(ms.count(), 0) % 1000 * 1000)};
    tv.tv_sec = std::max<int64_t>(ms.count(), 0) / 1000;
    if (select(fd_ + 1, &set, nullptr, nullptr, &tv) <= 0) return false;
    char buf[4096];
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n <= 0) return false;
    out_.append(buf, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string out_;
};

// The reply text between the echoed prompt line and the "reply stopped" notice,
// with the terminal's CR LF turned back into LF and its "^C" echo dropped.
std::string streamed_reply(const std::string& turn) {
  const size_t start = turn.find('\n') + 1, stop = turn.find("^C", start);
  std::string r;
  for (char ch : turn.substr(start, stop - start))
    if (ch != '\r') r += ch;
  return r;
}

TEST(ChatPty, EditingHistoryCtrlCResetAndExit) {
  ASSERT_TRUE(tkv::testing::have(tkv::testing::smollm2_path()))
      << "SmolLM2 missing: run scripts/fetch-models";
  PtyChat c;
  ASSERT_TRUE(c.wait_for("> ", 0, 30)) << c.out();
  // "/hep", cursor left once, "l": only line editing turns it into "/help".
  size_t mark = c.size();
  c.send("/hep\x1b[Dl\r");
  ASSERT_TRUE(c.wait_for("/reset  forget", mark)) << c.out();
  ASSERT_TRUE(c.wait_for_prompt_after("/reset  forget", mark)) << c.out();
  // Up arrow recalls "/help" from the history.
  mark = c.size();
  c.send("\x1b[A\r");
  ASSERT_TRUE(c.wait_for("/reset  forget", mark)) << c.out().substr(mark);
  ASSERT_TRUE(c.wait_for_prompt_after("/reset  forget", mark)) << c.out();
  // Multi-byte UTF-8 typed at the prompt arrives intact.
  mark = c.size();
  c.send("/caf\xc3\xa9 \xe2\x82\xac\r");
  ASSERT_TRUE(c.wait_for("unknown command /caf\xc3\xa9 \xe2\x82\xac;", mark))
      << c.out().substr(mark);
  ASSERT_TRUE(c.wait_for_prompt_after("unknown command", mark)) << c.out();
  // A long reply, interrupted by Ctrl-C once it streams: the prompt comes back.
  mark = c.size();
  c.send("Write a very long story about a dragon and a knight.\r");
  ASSERT_TRUE(c.wait_for("the", mark + 60, 30)) << c.out().substr(mark);
  c.send("\x03");
  ASSERT_TRUE(c.wait_for("reply stopped (Ctrl-C)", mark)) << c.out().substr(mark);
  ASSERT_TRUE(c.wait_for_prompt_after("reply stopped", mark)) << c.out().substr(mark);
  // /save writes the conversation: the reply as it streamed, once.
  const std::string reply = streamed_reply(c.out().substr(mark));
  ASSERT_GE(reply.size(), 20u) << c.out().substr(mark);
  const std::string path = ::testing::TempDir() + "chat_pty_save.json";
  mark = c.size();
  c.send("/save " + path + "\r");
  ASSERT_TRUE(c.wait_for("saved 2 messages", mark)) << c.out().substr(mark);
  ASSERT_TRUE(c.wait_for_prompt_after("saved 2 messages", mark)) << c.out();
  std::ifstream in(path);
  const auto saved = nlohmann::json::parse(in);
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[1]["role"], "assistant");
  EXPECT_EQ(saved[1]["content"].get<std::string>(), reply);
  mark = c.size();
  c.send("/reset\r");
  ASSERT_TRUE(c.wait_for("conversation cleared", mark)) << c.out().substr(mark);
  ASSERT_TRUE(c.wait_for_prompt_after("conversation cleared", mark)) << c.out();
  // Ctrl-C at the prompt does not end the session; it says how to leave.
  mark = c.size();
  c.send("\x03");
  ASSERT_TRUE(c.wait_for("Ctrl-D", mark)) << c.out().substr(mark);
  ASSERT_TRUE(c.wait_for_prompt_after("Ctrl-D", mark)) << c.out().substr(mark);
  // Ctrl-D at an empty prompt leaves with the KV summary and status 0.
  mark = c.size();
  c.send("\x04");
  EXPECT_EQ(c.wait_exit(), 0) << c.out().substr(mark);
  EXPECT_NE(c.out().find("kv cache bf16:", mark), std::string::npos) << c.out().substr(mark);
}

}  // namespace
