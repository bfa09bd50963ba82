#pragma once

// A QOpenGLWidget that draws with Dear ImGui: one ImGui context per canvas,
// Qt input forwarded through ImGuiQtInput, and a frame rendered only when
// something asked for it (input, new data, a resize), never in a loop.
// Subclasses draw in drawFrame() with ImGui's draw lists.

#include <QElapsedTimer>
#include <QOpenGLWidget>

struct ImGuiContext;

namespace meshscope::ui {

class ImGuiCanvas : public QOpenGLWidget {
    Q_OBJECT
  public:
    explicit ImGuiCanvas(QWidget* parent = nullptr);
    ~ImGuiCanvas() override;

    // Renders one frame now and waits for the GPU (benchmarks); returns the
    // frame's wall time in ms.
    double renderFrameNow();
    // CPU time of the last frame's drawFrame() + ImGui::Render(), in ms.
    double lastDrawMs() const { return m_lastDrawMs; }
    int64_t framesRendered() const { return m_frames; }
    // Vertices in the last frame's draw lists (what the GL side rasterizes).
    int64_t lastVertexCount() const { return m_lastVertices; }

  signals:
    void frameRendered();

  protected:
    virtual void drawFrame() = 0;
    // Asks for one more frame after this one (ImGui settles hover state a
    // frame late).
    void requestFollowUpFrame() { m_followUp = true; }

    void initializeGL() override;
    void paintGL() override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void keyReleaseEvent(QKeyEvent* event) override;
    void leaveEvent(QEvent* event) override;

  private:
    void ensureFonts();

    ImGuiContext* m_context = nullptr;
    QElapsedTimer m_clock;
    qreal m_fontScale = 0;  // device pixel ratio the font atlas was built for
    double m_lastDrawMs = 0;
    int64_t m_frames = 0;
    int64_t m_lastVertices = 0;
    bool m_followUp = false;
    bool m_glReady = false;
};

}  // namespace meshscope::ui
